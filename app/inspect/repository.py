"""Every SQL query of the inspector. Read-only; tenant-scoped unless ``tenant_id`` is None
(the operator's view: the CLI, or the master key on /ui).

Tables owned by later features (summaries, memories) are feature-detected in the database, so
the inspector works whether or not they exist yet.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import MetaData, Table, func, inspect, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.db.models import Conversation, Message, RequestLog
from app.db.repository import scoped

__all__ = ["InspectRepository", "inspect_repository"]


class InspectRepository:
    async def conversations(
        self, session: AsyncSession, tenant_id: str | None, *, limit: int, offset: int = 0
    ) -> list[Conversation]:
        statement = (
            scoped(select(Conversation), Conversation.tenant_id, tenant_id)
            .order_by(Conversation.updated_at.desc(), Conversation.id)
            .limit(limit)
            .offset(offset)
        )
        return list((await session.execute(statement)).scalars())

    async def conversation(
        self, session: AsyncSession, tenant_id: str | None, conversation_id: str
    ) -> Conversation | None:
        statement = scoped(
            select(Conversation).where(Conversation.id == conversation_id),
            Conversation.tenant_id,
            tenant_id,
        )
        return (await session.execute(statement)).scalar_one_or_none()

    async def request_totals(
        self, session: AsyncSession, conversation_ids: list[str]
    ) -> dict[str, tuple[int, float]]:
        """(requests, total cost) per conversation."""
        if not conversation_ids:
            return {}
        statement = (
            select(
                RequestLog.conversation_id,
                func.count(RequestLog.id),
                func.coalesce(func.sum(RequestLog.total_cost), 0.0),
            )
            .where(RequestLog.conversation_id.in_(conversation_ids))
            .group_by(RequestLog.conversation_id)
        )
        rows = (await session.execute(statement)).all()
        return {str(row[0]): (int(row[1]), float(row[2])) for row in rows}

    async def messages(
        self, session: AsyncSession, conversation_id: str, *, from_sequence: int = 0
    ) -> list[Message]:
        statement = (
            select(Message)
            .where(
                Message.conversation_id == conversation_id,
                Message.sequence_number >= from_sequence,
            )
            .order_by(Message.sequence_number)
        )
        return list((await session.execute(statement)).scalars())

    async def requests(
        self, session: AsyncSession, conversation_id: str, *, since: datetime | None = None
    ) -> list[RequestLog]:
        statement = select(RequestLog).where(RequestLog.conversation_id == conversation_id)
        if since is not None:
            statement = statement.where(RequestLog.created_at >= since)
        statement = statement.order_by(RequestLog.created_at, RequestLog.id)
        return list((await session.execute(statement)).scalars())

    async def _table(self, session: AsyncSession, name: str) -> Table | None:
        def reflect(sync_session: Session) -> Table | None:
            connection = sync_session.connection()
            if not inspect(connection).has_table(name):
                return None
            return Table(name, MetaData(), autoload_with=connection)

        table: Table | None = await session.run_sync(reflect)
        return table

    async def summaries(
        self, session: AsyncSession, conversation_id: str
    ) -> list[dict[str, object]] | None:
        """Compaction summaries, oldest first; None when the feature's table does not exist."""
        table = await self._table(session, "conversation_summaries")
        if table is None:
            return None
        statement = select(table).where(table.c.conversation_id == conversation_id)
        order = [table.c[name] for name in ("first_turn", "created_at") if name in table.c]
        rows = (await session.execute(statement.order_by(*order))).mappings().all()
        return [dict(row) for row in rows]

    async def memory_users(
        self, session: AsyncSession, tenant_id: str | None
    ) -> list[tuple[str, str, int]] | None:
        """(tenant, user, active memories); None when the memories table does not exist."""
        table = await self._table(session, "memories")
        if table is None:
            return None
        statement = select(table.c.tenant_id, table.c.user_id, func.count())
        if "superseded_by" in table.c:
            statement = statement.where(table.c.superseded_by.is_(None))
        statement = scoped(statement, table.c.tenant_id, tenant_id)
        statement = statement.group_by(table.c.tenant_id, table.c.user_id).order_by(
            table.c.tenant_id, table.c.user_id
        )
        rows = (await session.execute(statement)).all()
        return [(str(row[0]), str(row[1]), int(row[2])) for row in rows]

    async def memories(
        self, session: AsyncSession, tenant_id: str | None, user_id: str
    ) -> list[dict[str, object]] | None:
        """A user's memories, newest first, superseded ones included (marked)."""
        table = await self._table(session, "memories")
        if table is None:
            return None
        statement = scoped(
            select(table).where(table.c.user_id == user_id), table.c.tenant_id, tenant_id
        )
        if "created_at" in table.c:
            statement = statement.order_by(table.c.created_at.desc())
        rows = (await session.execute(statement)).mappings().all()
        return [{k: v for k, v in row.items() if k != "embedding"} for row in rows]


inspect_repository = InspectRepository()
