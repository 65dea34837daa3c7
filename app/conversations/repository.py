"""Every SQL query about conversations and their messages; scoped by tenant, no HTTP."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import (
    Table,
    delete,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.messages import HistoryColumns
from app.conversations.rows import MessageRow
from app.conversations.statements import (
    BY_HEADS,
    EDGE_HASHES,
    INSERT_MESSAGE,
    WITH_SUMMARIES,
    context_statement,
    conversation_with_ledger,
    conversation_with_summaries,
    guarded_update,
    messages_from,
)
from app.db.models import Conversation, ConversationSummaryRow, Message, PromptLedgerRow
from app.db.models.base import utcnow
from app.db.repository import TenantRepository, execute_core

__all__ = ["ConversationRepository", "conversation_repository"]

_messages = cast(Table, Message.__table__)


class ConversationRepository(TenantRepository[Conversation]):
    async def get_with_summaries(
        self, session: AsyncSession, tenant_id: str, conversation_id: str
    ) -> tuple[Conversation | None, list[ConversationSummaryRow], PromptLedgerRow | None]:
        """The conversation, its active (unmerged) summaries and the prompt owner's ledger
        (app/turns/owner.py), in one statement.

        The summaries are what ``MemoryRepository.active_summaries`` returns, in its order.
        """
        params = {"conversation_id": conversation_id, "tenant_id": tenant_id}
        rows = (await execute_core(session, WITH_SUMMARIES, params)).all()
        if not rows:
            return None, [], None
        return conversation_with_summaries(rows)

    async def update_if_unchanged(
        self,
        session: AsyncSession,
        tenant_id: str,
        conversation_id: str,
        expected: Mapping[str, object],
        values: Mapping[str, object],
        now: datetime | None = None,
    ) -> bool:
        """Set ``values`` (and ``updated_at``: ``now``) on the conversation if its columns
        still equal ``expected``."""
        statement = guarded_update(tuple(expected), tuple(values))
        params = {f"old_{name}": value for name, value in expected.items()}
        params.update({f"new_{name}": value for name, value in values.items()})
        params.update(row_id=conversation_id, row_tenant=tenant_id, now=now or utcnow())
        result = await execute_core(session, statement, params)
        return bool(result.rowcount == 1)

    async def insert_messages(self, session: AsyncSession, rows: list[MessageRow]) -> None:
        """One executemany of whole message rows (every row has every column)."""
        await execute_core(session, INSERT_MESSAGE, rows)

    async def find_by_heads(
        self, session: AsyncSession, tenant_id: str, heads: Sequence[str]
    ) -> list[tuple[Conversation, PromptLedgerRow | None]]:
        """The caller's conversations whose whole stored sequence hashes to one of ``heads``,
        each with its prompt ledger (read in the same statement, as by id)."""
        found: list[tuple[Conversation, PromptLedgerRow | None]] = []
        for start in range(0, len(heads), 500):
            params = {"tenant_id": tenant_id, "heads": list(heads[start : start + 500])}
            rows = (await execute_core(session, BY_HEADS, params)).all()
            found.extend(conversation_with_ledger(row) for row in rows)
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
            (await execute_core(session, EDGE_HASHES, params)).all(), key=lambda row: row[1]
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
        result = await execute_core(session, context_statement(min_turn is not None), params)
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
        return (await execute_core(session, messages_from(), params)).all()

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
