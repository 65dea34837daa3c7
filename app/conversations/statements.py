"""The statements a chat turn runs on conversations and their messages, built once.

A chat request runs these on every turn. Built per call, their construction and cache-key
generation cost more CPU than SQLite takes to run them; built once with bind parameters,
SQLAlchemy reuses the memoized cache key and the compiled form, and on SQLite they run
straight on the connection (app/db/sqlite_core.py). The conversation repository runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import cast

from sqlalchemy import (
    CompoundSelect,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    func,
    insert,
    literal,
    or_,
    select,
    union,
    union_all,
    update,
)
from sqlalchemy.orm import aliased

from app.conversations.messages import HISTORY_COLUMNS, HistoryColumns
from app.db.entities import EntityColumns
from app.db.models import Conversation, ConversationSummaryRow, Message, PromptLedgerRow
from app.db.repository import conversation_scope

__all__ = [
    "BY_HEADS",
    "EDGE_HASHES",
    "INSERT_MESSAGE",
    "WITH_SUMMARIES",
    "context_statement",
    "conversation_with_ledger",
    "conversation_with_summaries",
    "guarded_update",
    "messages_from",
]

_messages = cast(Table, Message.__table__)
_conversations = cast(Table, Conversation.__table__)

INSERT_MESSAGE = insert(_messages)
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
WITH_SUMMARIES = (
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
        conversation_scope.tenant_clause(bindparam("tenant_id")),
    )
    .order_by(ConversationSummaryRow.first_turn)
)


def conversation_with_summaries(
    rows: Sequence[Sequence[object]],
) -> tuple[Conversation, list[ConversationSummaryRow], PromptLedgerRow | None]:
    """The conversation, its summaries and its ledger's newest part from ``WITH_SUMMARIES``
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
BY_HEADS = (
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
        conversation_scope.tenant_clause(bindparam("tenant_id")),
    )
)


def conversation_with_ledger(row: Sequence[object]) -> tuple[Conversation, PromptLedgerRow | None]:
    """A ``BY_HEADS`` row: the conversation and its ledger's newest part, if any."""
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


EDGE_HASHES = _edge_hashes()


@lru_cache(maxsize=2)
def context_statement(with_recent_turns: bool) -> Select[*HistoryColumns]:
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
def messages_from() -> Select[*HistoryColumns]:
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
def guarded_update(expected: tuple[str, ...], values: tuple[str, ...]) -> Update:
    """UPDATE conversations SET <values> WHERE id, tenant and every <expected> column still
    hold what was read (``IS``: a counter may be NULL)."""
    c = _conversations.c
    return (
        update(_conversations)
        .where(
            c.id == bindparam("row_id"),
            conversation_scope.tenant_clause(bindparam("row_tenant")),
            *[c[name].is_not_distinct_from(bindparam(f"old_{name}")) for name in expected],
        )
        .values(
            {**{name: bindparam(f"new_{name}") for name in values}, "updated_at": bindparam("now")}
        )
    )
