"""Every SQL query compaction makes: a conversation's turns, messages and summaries; no HTTP."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Conversation, ConversationSummaryRow, Message
from app.db.repository import TenantRepository

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

    async def messages_between(
        self,
        session: AsyncSession,
        conversation_id: str,
        *,
        first_sequence: int,
        first_turn: int,
        last_turn: int,
    ) -> list[Message]:
        statement = (
            select(Message)
            .where(
                Message.conversation_id == conversation_id,
                Message.sequence_number >= first_sequence,
                Message.turn_number >= first_turn,
                Message.turn_number <= last_turn,
                Message.status != "deleted",  # deleted through the Conversations API
            )
            .order_by(Message.sequence_number)
        )
        return list((await session.execute(statement)).scalars())

    # ---- summaries ----------------------------------------------------------------------
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
