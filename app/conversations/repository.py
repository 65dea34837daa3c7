"""Every SQL query about conversations and their messages; scoped by tenant, no HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, delete, func, literal, select, union, union_all, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Conversation, ConversationSummaryRow, Message

__all__ = ["ConversationRepository", "conversation_repository"]


class ConversationRepository:
    async def get(
        self,
        session: AsyncSession,
        tenant_id: str,
        conversation_id: str,
        *,
        for_update: bool = False,
    ) -> Conversation | None:
        statement = select(Conversation).where(
            Conversation.id == conversation_id, Conversation.tenant_id == tenant_id
        )
        if for_update:
            statement = statement.with_for_update()
        return (await session.execute(statement)).scalar_one_or_none()

    async def get_with_summaries(
        self, session: AsyncSession, tenant_id: str, conversation_id: str
    ) -> tuple[Conversation | None, list[ConversationSummaryRow]]:
        """The conversation and its active (unmerged) summaries, in one statement.

        The summaries are what ``MemoryRepository.active_summaries`` returns, in its order.
        """
        statement = (
            select(Conversation, ConversationSummaryRow)
            .outerjoin(
                ConversationSummaryRow,
                and_(
                    ConversationSummaryRow.conversation_id == Conversation.id,
                    ConversationSummaryRow.merged_into.is_(None),
                ),
            )
            .where(Conversation.id == conversation_id, Conversation.tenant_id == tenant_id)
            .order_by(ConversationSummaryRow.first_turn)
        )
        rows = (await session.execute(statement)).all()
        if not rows:
            return None, []
        return rows[0][0], [row[1] for row in rows if row[1] is not None]

    async def update_if_unchanged(
        self,
        session: AsyncSession,
        tenant_id: str,
        conversation_id: str,
        expected: dict[str, Any],
        values: dict[str, Any],
    ) -> bool:
        """Set ``values`` on the conversation if its columns still equal ``expected``."""
        guard = [getattr(Conversation, name) == value for name, value in expected.items()]
        statement = (
            update(Conversation)
            .where(Conversation.id == conversation_id, Conversation.tenant_id == tenant_id, *guard)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        result = await session.execute(statement)
        return bool(getattr(result, "rowcount", 0) == 1)

    async def find_by_heads(
        self, session: AsyncSession, tenant_id: str, heads: Sequence[str]
    ) -> list[Conversation]:
        """The caller's conversations whose whole stored sequence hashes to one of ``heads``."""
        found: list[Conversation] = []
        for start in range(0, len(heads), 500):
            batch = list(heads[start : start + 500])
            statement = select(Conversation).where(
                Conversation.tenant_id == tenant_id, Conversation.head_hash.in_(batch)
            )
            found.extend((await session.execute(statement)).scalars())
        return found

    async def list_recent(
        self, session: AsyncSession, tenant_id: str, *, limit: int, offset: int = 0
    ) -> list[Conversation]:
        statement = (
            select(Conversation)
            .where(Conversation.tenant_id == tenant_id)
            .order_by(Conversation.updated_at.desc(), Conversation.id)
            .limit(limit)
            .offset(offset)
        )
        return list((await session.execute(statement)).scalars())

    async def count(self, session: AsyncSession, tenant_id: str) -> int:
        statement = select(func.count()).where(Conversation.tenant_id == tenant_id)
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
        last = (
            select(
                literal(1).label("part"),
                Message.sequence_number.label("sequence"),
                Message.content_hash.label("hash"),
            )
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.sequence_number.desc())
            .limit(tail)
            .subquery()
        )
        first = select(
            literal(0).label("part"),
            Message.sequence_number.label("sequence"),
            Message.content_hash.label("hash"),
        ).where(Message.conversation_id == conversation_id, Message.sequence_number < head)
        statement = union_all(first, select(last.c.part, last.c.sequence, last.c.hash))
        rows = sorted((await session.execute(statement)).all(), key=lambda row: row[1])
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
    ) -> list[Message]:
        """The system prompt plus every message from absolute token position ``cut`` on.

        One indexed range query: its cost follows what can be sent, not the history's length.
        ``min_turn`` also loads whole recent turns (from ``first_sequence`` on) before the cut,
        so the context engine can shrink their tool results instead of losing them.
        """
        wanted = [Message.sequence_number < system_count, Message.start_tokens >= cut]
        if min_turn is not None:
            wanted.append(
                and_(Message.turn_number >= min_turn, Message.sequence_number >= first_sequence)
            )
        # One range per condition, each on an index, united: an OR over one scan would walk
        # the conversation's every row (4 ms at 10,000 messages on SQLite; bench/README.md).
        ranges = [
            select(Message.id).where(Message.conversation_id == conversation_id, condition)
            for condition in wanted
        ]
        statement = (
            select(Message)
            .where(Message.id.in_(union(*ranges).scalar_subquery()))
            .order_by(Message.sequence_number)
        )
        return list((await session.execute(statement)).scalars())

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

    async def all_messages(self, session: AsyncSession, conversation_id: str) -> list[Message]:
        statement = (
            select(Message)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.sequence_number)
        )
        return list((await session.execute(statement)).scalars())


conversation_repository = ConversationRepository()
