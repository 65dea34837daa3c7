"""The SQL of the Conversations API's items: stored messages by row id, the ids Responses gave
their output items, hiding a deleted item's message. Tenant-scoped; no HTTP."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import cast

from sqlalchemy import Insert, Table, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.rows import ResponseItemRow
from app.db.models import Conversation, Message, PromptLedgerRow, ResponseItem, utcnow
from app.db.repository import TenantScope
from app.db.upsert import dialect_insert

_ledger_scope: TenantScope[PromptLedgerRow] = TenantScope(PromptLedgerRow)
_conversation_scope: TenantScope[Conversation] = TenantScope(Conversation)

__all__ = ["ItemsRepository", "items_repository"]


class ItemsRepository:
    def __init__(self) -> None:
        self.messages = TenantScope(Message)
        self.items = TenantScope(ResponseItem)

    async def message(
        self, session: AsyncSession, tenant_id: str, message_id: int
    ) -> Message | None:
        statement = select(Message).where(
            self.messages.tenant_clause(tenant_id), Message.id == message_id
        )
        return (await session.execute(statement)).scalar_one_or_none()

    async def message_at(
        self, session: AsyncSession, tenant_id: str, conversation_id: str, sequence: int
    ) -> Message | None:
        statement = select(Message).where(
            self.messages.tenant_clause(tenant_id),
            Message.conversation_id == conversation_id,
            Message.sequence_number == sequence,
        )
        return (await session.execute(statement)).scalar_one_or_none()

    async def messages_from(
        self, session: AsyncSession, conversation_id: str, first_sequence: int
    ) -> list[Message]:
        statement = (
            select(Message)
            .where(
                Message.conversation_id == conversation_id,
                Message.sequence_number >= first_sequence,
            )
            .order_by(Message.sequence_number)
        )
        return list((await session.execute(statement)).scalars())

    async def hide(
        self,
        session: AsyncSession,
        tenant_id: str,
        conversation_id: str,
        message_id: int,
        status: str,
    ) -> None:
        """Set a stored message's status; the conversation's ``updated_at`` moves with it, so
        the rows of it a process keeps (app/conversations/tail_cache.py) are read again."""
        await session.execute(update(Message).where(Message.id == message_id).values(status=status))
        await session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id, _conversation_scope.tenant_clause(tenant_id))
            .values(updated_at=utcnow())
        )

    async def forget_kept_prompt(
        self, session: AsyncSession, tenant_id: str, conversation_id: str
    ) -> None:
        """Drop the prompt the prompt owner keeps (app/turns/owner.py): it may hold a hidden
        message, so the next call assembles the prompt anew."""
        await session.execute(
            delete(PromptLedgerRow).where(
                PromptLedgerRow.conversation_id == conversation_id,
                _ledger_scope.tenant_clause(tenant_id),
            )
        )

    async def recorded_ids(
        self, session: AsyncSession, tenant_id: str, conversation_id: str
    ) -> dict[int, list[str]]:
        """Sequence number → the ids a Response gave that message's items, in order."""
        statement = (
            select(ResponseItem.sequence_number, ResponseItem.id)
            .where(
                self.items.tenant_clause(tenant_id),
                ResponseItem.conversation_id == conversation_id,
            )
            .order_by(ResponseItem.sequence_number, ResponseItem.position)
        )
        found: dict[int, list[str]] = defaultdict(list)
        for sequence, item_id in (await session.execute(statement)).all():
            found[sequence].append(item_id)
        return dict(found)

    async def response_items(
        self, session: AsyncSession, tenant_id: str, ids: Sequence[str]
    ) -> dict[str, ResponseItem]:
        if not ids:
            return {}
        statement = select(ResponseItem).where(
            self.items.tenant_clause(tenant_id), ResponseItem.id.in_(list(set(ids)))
        )
        return {row.id: row for row in (await session.execute(statement)).scalars()}

    async def record(self, session: AsyncSession, rows: list[ResponseItemRow]) -> None:
        """Insert the rows; an id recorded already keeps its first place (never fails a turn)."""
        if not rows:
            return
        connection = await session.connection()
        table = cast(Table, ResponseItem.__table__)
        insert = dialect_insert(connection.dialect.name, table)
        statement: Insert = insert.on_conflict_do_nothing(index_elements=["id"])
        await connection.execute(statement, [{"created_at": utcnow(), **row} for row in rows])


items_repository = ItemsRepository()
