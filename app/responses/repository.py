"""Every SQL query about stored responses; tenant-scoped through ``TenantRepository``."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, insert, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ResponseRecord
from app.db.repository import TenantRepository
from app.responses.rows import ResponseRow

__all__ = ["ResponseRepository", "response_repository"]


class ResponseRepository(TenantRepository[ResponseRecord]):
    async def insert(self, session: AsyncSession, row: ResponseRow) -> None:
        """A plain INSERT in the transaction that stores the turn (no unit of work)."""
        connection = await session.connection()
        await connection.execute(_INSERT, row)

    async def mark_incomplete(
        self, session: AsyncSession, tenant_id: str, response_id: str, reason: str
    ) -> None:
        await session.execute(
            update(ResponseRecord)
            .where(self.tenant_clause(tenant_id), ResponseRecord.id == response_id)
            .values(status="incomplete", incomplete_reason=reason)
        )


response_repository = ResponseRepository(ResponseRecord)
_INSERT = insert(cast(Table, ResponseRecord.__table__))  # built once: written on every turn
