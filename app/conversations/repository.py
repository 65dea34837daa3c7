"""Every SQL query about conversations and their messages; scoped by tenant, no HTTP."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import cast

from sqlalchemy import (
    CompoundSelect,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    union,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.conversations.messages import HISTORY_COLUMNS, HistoryColumns
from app.conversations.rows import MessageRow
from app.db.entities import EntityColumns
from app.db.models import Conversation, ConversationSummaryRow, Message, PromptLedgerRow
from app.db.models.base import utcnow
from app.db.repository import TenantRepository, execute_core

__all__ = ["ConversationRepository", "conversation_repository"]


class ConversationRepository(TenantRepository[Conversation]):
    async def get_with_summaries(
        self, session: AsyncSession, tenant_id: str, conversation_id: str
    ) -> tuple[Conversation | None, list[ConversationSummaryRow], PromptLedgerRow | None]:
        """The conversation, its active (unmerged) summaries and the prompt owner's ledger
        (app/turns/owner.py), in one statement.

        The summaries are what ``MemoryRepository.active_summaries`` returns, in its order.
        """
        params = {"conversation_id": conversation_id, "tenant_id": tenant_id}
        rows = (await execute_core(session, _WITH_SUMMARIES, params)).all()
        if not rows:
            return None, [], None
        return _entities(rows)

    async def update_if_unchanged(
        self,
        session: AsyncSession,
        tenant_id: str,
        conversation_id: str,
        expected: Mapping[str, object],
        values: Mapping[str, object],
    ) -> bool:
        """Set ``values`` on the conversation if its columns still equal ``expected``."""
        statement = _guarded_update(tuple(expected), tuple(values))
        params = {f"old_{name}": value for name, value in expected.items()}
        params.update({f"new_{name}": value for name, value in values.items()})
        params.update(row_id=conversation_id, row_tenant=tenant_id, now=utcnow())
        result = await execute_core(session, statement, params)
        return bool(result.rowcount == 1)

    async def insert_messages(self, session: AsyncSession, rows: list[MessageRow]) -> None:
        """One executemany of whole message rows (every row has every column)."""
        await execute_core(session, _INSERT_MESSAGE, rows)

    async def find_by_heads(
        self, session: AsyncSession, tenant_id: str, heads: Sequence[str]
    ) -> list[tuple[Conversation, PromptLedgerRow | None]]:
        """The caller's conversations whose whole stored sequence hashes to one of ``heads``,
        each with its prompt ledger (read in the same statement, as by id)."""
        found: list[tuple[Conversation, PromptLedgerRow | None]] = []
        for start in range(0, len(heads), 500):
            params = {"tenant_id": tenant_id, "heads": list(heads[start : start + 500])}
            rows = (await execute_core(session, _BY_HEADS, params)).all()
            found.extend(_with_ledger(row) for row in rows)
        return found

    async def list_recent(
        self, session: AsyncSession, tenant_id: str, *, limit: int, offset: int = 0
    ) -> list[Conversation]:
        statement = (
            self.base_statement(tenant_id)
            .order_by(Conversation.updated_at.desc(), Conversation.id)
            .limit(limit)
            .offset(offset)
        )
        return list((await session.execute(statement)).scalars())

    async def count(self, session: AsyncSession, tenant_id: str) -> int:
        statement = select(func.count()).where(self.tenant_clause(tenant_id))
        return int((await session.execute(statement)).scalar_one())

    async def delete(self, session: AsyncSession, conversation: Conversation) -> None:
        await session.execute(delete(Message).where(Message.conversation_id == conversation.id))
        await session.delete(conversation)

    async def tail_content_hashes(
        self, session: AsyncSession, conversation_id: str, count: int
    ) -> list[str]:
        """Content hashes of the last ``count`` stored messages, oldest first."""
        statement = (
            select(Message.content_hash)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.sequence_number.desc())
            .limit(count)
        )
        return list(reversed((await session.execute(statement)).scalars().all()))

    async def head_content_hashes(
        self, session: AsyncSession, conversation_id: str, count: int
    ) -> list[str]:
        """Content hashes of the first ``count`` stored messages (the system prompt)."""
        if count <= 0:
            return []
        statement = (
            select(Message.content_hash)
            .where(Message.conversation_id == conversation_id, Message.sequence_number < count)
            .order_by(Message.sequence_number)
        )
        return list((await session.execute(statement)).scalars().all())

    async def edge_content_hashes(
        self, session: AsyncSession, conversation_id: str, *, head: int, tail: int
    ) -> tuple[list[str], list[str]]:
        """The first ``head`` and the last ``tail`` stored content hashes, in one statement.

        Both oldest first; what ``head_content_hashes`` and ``tail_content_hashes`` return.
        """
        params = {"conversation_id": conversation_id, "head": head, "tail": tail}
        rows = sorted(
            (await execute_core(session, _EDGE_HASHES, params)).all(), key=lambda row: row[1]
        )
        return (
            [row[2] for row in rows if row[0] == 0],
            [row[2] for row in rows if row[0] == 1],
        )

    async def context_messages(
        self,
        session: AsyncSession,
        conversation_id: str,
        *,
        system_count: int,
        cut: int,
        min_turn: int | None = None,
        first_sequence: int = 0,
    ) -> Sequence[tuple[*HistoryColumns]]:
        """The system prompt plus every message from absolute token position ``cut`` on.

        One indexed range query: its cost follows what can be sent, not the history's length.
        ``min_turn`` also loads whole recent turns (from ``first_sequence`` on) before the cut,
        so the context engine can shrink their tool results instead of losing them.
        """
        params: dict[str, object] = {
            "conversation_id": conversation_id,
            "system_count": system_count,
            "cut": cut,
            "min_turn": min_turn,
            "first_sequence": first_sequence,
        }
        result = await execute_core(session, _context_statement(min_turn is not None), params)
        return result.all()

    async def tool_call_turns(
        self, session: AsyncSession, conversation_id: str, call_ids: set[str], *, scan: int = 200
    ) -> dict[str, int]:
        """The turn of each stored assistant message (among the last ``scan``) making a call."""
        statement = (
            select(Message.tool_calls, Message.turn_number)
            .where(Message.conversation_id == conversation_id, Message.role == "assistant")
            .order_by(Message.sequence_number.desc())
            .limit(scan)
        )
        found: dict[str, int] = {}
        for tool_calls, turn in (await session.execute(statement)).all():
            for call in tool_calls or []:
                call_id = str(call.get("id"))
                if call_id in call_ids:
                    found.setdefault(call_id, turn)
        return found

    async def messages_from(
        self, session: AsyncSession, conversation_id: str, first_sequence: int
    ) -> Sequence[tuple[*HistoryColumns]]:
        """The ``HISTORY_COLUMNS`` of the messages from ``first_sequence`` on (a tool loop's
        newest answer, for the prompt owner's append: one indexed range query)."""
        params = {"conversation_id": conversation_id, "first_sequence": first_sequence}
        return (await execute_core(session, _messages_from(), params)).all()

    async def all_messages(self, session: AsyncSession, conversation_id: str) -> list[Message]:
        statement = (
            select(Message)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.sequence_number)
        )
        return list((await session.execute(statement)).scalars())

    async def copy_messages(
        self, session: AsyncSession, source_id: str, target_id: str, upto: int
    ) -> None:
        """Copy messages [0, upto) of one conversation into another, every column as stored
        (reasoning, hashes and token positions included): one INSERT … SELECT."""
        columns = [c for c in _messages.c if c.name not in ("id", "conversation_id")]
        source = select(literal(target_id).label("conversation_id"), *columns).where(
            _messages.c.conversation_id == source_id, _messages.c.sequence_number < upto
        )
        names = ["conversation_id", *(c.name for c in columns)]
        await session.execute(insert(_messages).from_select(names, source))

    async def prefix_edges(
        self, session: AsyncSession, conversation_id: str, upto: int
    ) -> tuple[Message | None, Message | None]:
        """The last message before ``upto``, and the last user message before it."""
        last = select(Message).where(
            Message.conversation_id == conversation_id, Message.sequence_number < upto
        )
        user = last.where(Message.role == "user")
        order = Message.sequence_number.desc()
        return (
            (await session.execute(last.order_by(order).limit(1))).scalar_one_or_none(),
            (await session.execute(user.order_by(order).limit(1))).scalar_one_or_none(),
        )


conversation_repository = ConversationRepository(Conversation)


# ---- hot-path statements, built once ----------------------------------------------------
# A chat request runs these on every turn. Built per call, their construction and cache-key
# generation cost more CPU than SQLite takes to run them; built once with bind parameters,
# SQLAlchemy reuses the memoized cache key and the compiled form. The ones that return plain
# rows run on the session's connection (Core), skipping the ORM's execution layer.
_messages = cast(Table, Message.__table__)
_conversations = cast(Table, Conversation.__table__)

_INSERT_MESSAGE = insert(_messages)
_ACTIVE_SUMMARY = and_(
    ConversationSummaryRow.conversation_id == Conversation.id,
    ConversationSummaryRow.merged_into.is_(None),
    ConversationSummaryRow.kind == "compaction",
)
_other = aliased(ConversationSummaryRow)
_FIRST_SUMMARY = (
    select(func.min(_other.first_turn))
    .where(
        _other.conversation_id == Conversation.id,
        _other.merged_into.is_(None),
        _other.kind == "compaction",
    )
    .correlate(Conversation)
    .scalar_subquery()
)
# The ledger is stored in parts (app/db/models/prompt_ledger.py): the newest carries its figures.
_part = aliased(PromptLedgerRow)
_NEWEST_PART = (
    select(func.max(_part.part))
    .where(_part.conversation_id == Conversation.id)
    .correlate(Conversation)
    .scalar_subquery()
)
# Read as plain columns: the instances are only read (app/db/entities.py).
_CONVERSATION = EntityColumns(Conversation)
_SUMMARY = EntityColumns(ConversationSummaryRow)
_LEDGER = EntityColumns(PromptLedgerRow)
_WITH_SUMMARIES = (
    select(*_CONVERSATION.columns, *_SUMMARY.columns, *_LEDGER.columns)
    .select_from(_conversations)
    .outerjoin(ConversationSummaryRow, _ACTIVE_SUMMARY)
    # The ledger's newest part (it carries the tenant) rides on the first row only: a base
    # part holds a whole prompt, and a conversation may have several summaries.
    .outerjoin(
        PromptLedgerRow,
        and_(
            PromptLedgerRow.conversation_id == Conversation.id,
            PromptLedgerRow.part == _NEWEST_PART,
            or_(
                ConversationSummaryRow.first_turn.is_(None),
                ConversationSummaryRow.first_turn == _FIRST_SUMMARY,
            ),
        ),
    )
    .where(
        Conversation.id == bindparam("conversation_id"),
        conversation_repository.tenant_clause(bindparam("tenant_id")),
    )
    .order_by(ConversationSummaryRow.first_turn)
)


def _entities(
    rows: Sequence[Sequence[object]],
) -> tuple[Conversation, list[ConversationSummaryRow], PromptLedgerRow | None]:
    """The conversation, its summaries and its ledger's newest part from ``_WITH_SUMMARIES``
    rows (a summary's or the part's columns are all NULL where the outer join found none)."""
    summary_at = _CONVERSATION.width
    ledger_at = summary_at + _SUMMARY.width
    first = rows[0]
    conversation = _CONVERSATION.build(first[:summary_at])
    summaries = [
        _SUMMARY.build(row[summary_at:ledger_at]) for row in rows if row[summary_at] is not None
    ]
    ledger = _LEDGER.build(first[ledger_at:]) if first[ledger_at] is not None else None
    return conversation, summaries, ledger


# Built once, the heads an expanding parameter: an agent's prompt brings ~100 of them, and
# ``in_(list)`` coerced each one every call.
_BY_HEADS = (
    select(*_CONVERSATION.columns, *_LEDGER.columns)
    .select_from(_conversations)
    .outerjoin(
        PromptLedgerRow,
        and_(
            PromptLedgerRow.conversation_id == Conversation.id,
            PromptLedgerRow.part == _NEWEST_PART,
        ),
    )
    .where(
        Conversation.head_hash.in_(bindparam("heads", expanding=True)),
        conversation_repository.tenant_clause(bindparam("tenant_id")),
    )
)


def _with_ledger(row: Sequence[object]) -> tuple[Conversation, PromptLedgerRow | None]:
    """A ``_BY_HEADS`` row: the conversation and its ledger's newest part, if any."""
    at = _CONVERSATION.width
    ledger = _LEDGER.build(row[at:]) if row[at] is not None else None
    return _CONVERSATION.build(row[:at]), ledger


def _edge_hashes() -> CompoundSelect[int, int, str]:
    c = _messages.c
    last = (
        select(
            literal(1).label("part"),
            c.sequence_number.label("sequence"),
            c.content_hash.label("hash"),
        )
        .where(c.conversation_id == bindparam("conversation_id"))
        .order_by(c.sequence_number.desc())
        .limit(bindparam("tail"))
        .subquery()
    )
    first = select(
        literal(0).label("part"), c.sequence_number.label("sequence"), c.content_hash.label("hash")
    ).where(
        c.conversation_id == bindparam("conversation_id"),
        c.sequence_number < bindparam("head"),
    )
    return union_all(first, select(last.c.part, last.c.sequence, last.c.hash))


_EDGE_HASHES = _edge_hashes()


@lru_cache(maxsize=2)
def _context_statement(with_recent_turns: bool) -> Select[*HistoryColumns]:
    """See ``context_messages``: one indexed range per condition, united; columns, not
    entities (no identity map or instrumented instances for what is only read)."""
    c = _messages.c
    wanted = [c.sequence_number < bindparam("system_count"), c.start_tokens >= bindparam("cut")]
    if with_recent_turns:
        wanted.append(
            and_(
                c.turn_number >= bindparam("min_turn"),
                c.sequence_number >= bindparam("first_sequence"),
            )
        )
    ranges = [
        select(c.id).where(c.conversation_id == bindparam("conversation_id"), condition)
        for condition in wanted
    ]
    columns = [c[name] for name in HISTORY_COLUMNS]
    return (
        select(*columns)
        .where(c.id.in_(union(*ranges).scalar_subquery()))
        .order_by(c.sequence_number)
    )


@lru_cache(maxsize=1)
def _messages_from() -> Select[*HistoryColumns]:
    c = _messages.c
    return (
        select(*[c[name] for name in HISTORY_COLUMNS])
        .where(
            c.conversation_id == bindparam("conversation_id"),
            c.sequence_number >= bindparam("first_sequence"),
        )
        .order_by(c.sequence_number)
    )


@lru_cache(maxsize=16)
def _guarded_update(expected: tuple[str, ...], values: tuple[str, ...]) -> Update:
    """UPDATE conversations SET <values> WHERE id, tenant and every <expected> column still
    hold what was read (``IS``: a counter may be NULL)."""
    c = _conversations.c
    return (
        update(_conversations)
        .where(
            c.id == bindparam("row_id"),
            conversation_repository.tenant_clause(bindparam("row_tenant")),
            *[c[name].is_not_distinct_from(bindparam(f"old_{name}")) for name in expected],
        )
        .values(
            {**{name: bindparam(f"new_{name}") for name in values}, "updated_at": bindparam("now")}
        )
    )
