"""Every SQL query compaction makes: a conversation's turns, messages and summaries; no HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.entities import EntityColumns
from app.db.models import Conversation, ConversationSummaryRow, Message
from app.db.repository import TenantRepository, execute_core

__all__ = ["SummaryRepository", "TurnSpan", "summary_repository"]


@dataclass(frozen=True, slots=True)
class TurnSpan:
    """One turn of the raw history: where it starts and how big it is."""

    turn: int
    first_sequence: int
    start_tokens: int
    tokens: int
    messages: int


_conversations = TenantRepository(Conversation)
_MESSAGE = EntityColumns(Message)
_SUMMARY = EntityColumns(ConversationSummaryRow)
_SUMMARY_FIELDS = [
    (key, column.key) for key, column in zip(_SUMMARY.keys, _SUMMARY.columns, strict=True)
]
_INSERT_SUMMARY = insert(cast(Table, ConversationSummaryRow.__table__))
_TURN_COUNTS = select(Conversation.turn_count, Conversation.system_prompt_count).where(
    Conversation.id == bindparam("conversation_id"),
    _conversations.tenant_clause(bindparam("tenant_id")),
)
_MESSAGES_BETWEEN = (
    select(*_MESSAGE.columns)
    .where(
        Message.conversation_id == bindparam("conversation_id"),
        Message.sequence_number >= bindparam("first_sequence"),
        Message.turn_number >= bindparam("first_turn"),
        Message.turn_number <= bindparam("last_turn"),
        Message.status != "deleted",  # deleted through the Conversations API
    )
    .order_by(Message.sequence_number)
)


class SummaryRepository(TenantRepository[ConversationSummaryRow]):
    # ---- conversations and their turns --------------------------------------------------
    async def conversation(
        self, session: AsyncSession, tenant_id: str, conversation_id: str, *, lock: bool = False
    ) -> Conversation | None:
        return await _conversations.get(session, tenant_id, conversation_id, for_update=lock)

    async def turns_after(
        self, session: AsyncSession, conversation_id: str, first_sequence: int
    ) -> list[TurnSpan]:
        """The turns from message ``first_sequence`` on (the raw region), oldest first."""
        statement = (
            select(
                Message.turn_number,
                func.min(Message.sequence_number),
                func.min(Message.start_tokens),
                func.sum(Message.token_count),
                func.count(),
            )
            .where(
                Message.conversation_id == conversation_id,
                Message.sequence_number >= first_sequence,
            )
            .group_by(Message.turn_number)
            .order_by(Message.turn_number)
        )
        rows = (await session.execute(statement)).all()
        return [TurnSpan(int(t), int(s), int(p), int(n or 0), int(c)) for t, s, p, n, c in rows]

    async def turn_counts(
        self, session: AsyncSession, tenant_id: str, conversation_id: str
    ) -> tuple[int, int] | None:
        """The conversation's (turns, leading system messages), or None: what a summary of
        its newest turns needs of it (a read, no instance)."""
        params = {"conversation_id": conversation_id, "tenant_id": tenant_id}
        rows = (await execute_core(session, _TURN_COUNTS, params)).all()
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    async def messages_between(
        self,
        session: AsyncSession,
        conversation_id: str,
        *,
        first_sequence: int,
        first_turn: int,
        last_turn: int,
    ) -> list[Message]:
        """The messages of turns ``first_turn``..``last_turn`` from ``first_sequence`` on, in
        order, but those deleted through the Conversations API; read-only instances."""
        params = {
            "conversation_id": conversation_id,
            "first_sequence": first_sequence,
            "first_turn": first_turn,
            "last_turn": last_turn,
        }
        rows = (await execute_core(session, _MESSAGES_BETWEEN, params)).all()
        return [_MESSAGE.build(row) for row in rows]

    async def insert(self, session: AsyncSession, row: ConversationSummaryRow) -> None:
        """A new summary as one plain INSERT (its unset columns take their defaults)."""
        given = row.__dict__
        values = {column: given[key] for key, column in _SUMMARY_FIELDS if key in given}
        await execute_core(session, _INSERT_SUMMARY, values)

    async def active_summaries(
        self, session: AsyncSession, conversation_id: str
    ) -> list[ConversationSummaryRow]:
        statement = (
            select(ConversationSummaryRow)
            .where(
                ConversationSummaryRow.conversation_id == conversation_id,
                ConversationSummaryRow.merged_into.is_(None),
                ConversationSummaryRow.kind == "compaction",  # periodic ones are not the bundle
            )
            .order_by(ConversationSummaryRow.first_turn)
        )
        return list((await session.execute(statement)).scalars())

    async def all_summaries(
        self, session: AsyncSession, tenant_id: str, conversation_id: str
    ) -> list[ConversationSummaryRow]:
        statement = (
            self.base_statement(tenant_id)
            .where(ConversationSummaryRow.conversation_id == conversation_id)
            .order_by(ConversationSummaryRow.first_turn, ConversationSummaryRow.level)
        )
        return list((await session.execute(statement)).scalars())

    async def mark_merged(
        self, session: AsyncSession, summary_ids: list[str], merged_into: str
    ) -> int:
        statement = (
            update(ConversationSummaryRow)
            .where(
                ConversationSummaryRow.id.in_(summary_ids),
                ConversationSummaryRow.merged_into.is_(None),
            )
            .values(merged_into=merged_into)
        )
        result = await session.execute(statement)
        return int(getattr(result, "rowcount", 0) or 0)


summary_repository = SummaryRepository(ConversationSummaryRow)
