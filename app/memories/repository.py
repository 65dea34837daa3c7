"""Every SQL query about summaries and long-term memories; scoped by tenant, no HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.repository import conversation_repository
from app.db.models import Conversation, ConversationSummaryRow, Memory, Message
from app.db.repository import TenantRepository

__all__ = ["MemoryRepository", "TurnSpan", "memory_repository"]


@dataclass(frozen=True, slots=True)
class TurnSpan:
    """One turn of the raw history: where it starts and how big it is."""

    turn: int
    first_sequence: int
    start_tokens: int
    tokens: int
    messages: int


_summaries = TenantRepository(ConversationSummaryRow)


class MemoryRepository(TenantRepository[Memory]):
    # ---- conversations and their turns --------------------------------------------------
    async def conversation(
        self, session: AsyncSession, tenant_id: str, conversation_id: str, *, lock: bool = False
    ) -> Conversation | None:
        return await conversation_repository.get(
            session, tenant_id, conversation_id, for_update=lock
        )

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
            _summaries.base_statement(tenant_id)
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

    # ---- long-term memories -------------------------------------------------------------
    async def memories(
        self, session: AsyncSession, tenant_id: str, user: str, *, active_only: bool = True
    ) -> list[Memory]:
        statement = self.base_statement(tenant_id).where(Memory.user_id == user)
        if active_only:
            statement = statement.where(Memory.superseded_by.is_(None))
        statement = statement.order_by(Memory.created_at, Memory.id)
        return list((await session.execute(statement)).scalars())

    async def memory_rows(self, session: AsyncSession, tenant_id: str, user: str) -> list[Any]:
        """The active memories' retrieval columns only (no ORM objects: cheaper for 10,000s)."""
        statement = (
            select(
                Memory.id,
                Memory.content,
                Memory.memory_type,
                Memory.importance,
                Memory.updated_at,
                Memory.embedding,
                Memory.embedding_model,
            )
            .where(
                self.tenant_clause(tenant_id),
                Memory.user_id == user,
                Memory.superseded_by.is_(None),
                Memory.key.is_(None),  # key/value facts are injected in full, not retrieved
            )
            .order_by(Memory.created_at, Memory.id)
        )
        return list((await session.execute(statement)).all())

    async def memory_signature(
        self, session: AsyncSession, tenant_id: str, user: str
    ) -> tuple[int, datetime | None]:
        """Changes whenever the user's active memories change (for retrieval caches)."""
        statement = select(func.count(), func.max(Memory.updated_at)).where(
            self.tenant_clause(tenant_id),
            Memory.user_id == user,
            Memory.superseded_by.is_(None),
        )
        count, latest = (await session.execute(statement)).one()
        return int(count), latest

    async def memory(self, session: AsyncSession, tenant_id: str, memory_id: str) -> Memory | None:
        return await self.get(session, tenant_id, memory_id)

    async def active_count(self, session: AsyncSession, tenant_id: str) -> int:
        """The tenant's active memories, every user (for the quota)."""
        statement = select(func.count()).where(
            self.tenant_clause(tenant_id), Memory.superseded_by.is_(None)
        )
        return int((await session.execute(statement)).scalar_one())

    async def supersede(
        self,
        session: AsyncSession,
        tenant_id: str,
        user: str,
        memory_ids: list[str],
        by: str,
        when: datetime,
    ) -> None:
        statement = (
            update(Memory)
            .where(
                self.tenant_clause(tenant_id),
                Memory.user_id == user,
                Memory.id.in_(memory_ids),
                Memory.id != by,
                Memory.superseded_by.is_(None),
            )
            .values(superseded_by=by, updated_at=when)
        )
        await session.execute(statement)

    async def facts(
        self, session: AsyncSession, tenant_id: str, user: str, key: str | None = None
    ) -> list[Memory]:
        """The user's active key/value facts (or the one of ``key``), newest first."""
        statement = select(Memory).where(
            Memory.tenant_id == tenant_id,
            Memory.user_id == user,
            Memory.superseded_by.is_(None),
            Memory.key.is_not(None) if key is None else Memory.key == key,
        )
        statement = statement.order_by(Memory.updated_at.desc(), Memory.id)
        return list((await session.execute(statement)).scalars())

    async def delete_memory(self, session: AsyncSession, memory: Memory) -> None:
        await session.delete(memory)

    async def forget_user(self, session: AsyncSession, tenant_id: str, user: str) -> int:
        statement = delete(Memory).where(self.tenant_clause(tenant_id), Memory.user_id == user)
        result = await session.execute(statement)
        return int(getattr(result, "rowcount", 0) or 0)


memory_repository = MemoryRepository(Memory)
