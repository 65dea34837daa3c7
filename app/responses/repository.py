"""Every SQL query about stored responses; tenant-scoped through ``TenantRepository``."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ResponseRecord
from app.db.repository import TenantRepository

__all__ = ["ResponseRepository", "response_repository"]


class ResponseRepository(TenantRepository[ResponseRecord]):
    def insert(self, session: AsyncSession, record: ResponseRecord) -> None:
        """Added to the session; flushed with the transaction that stores the turn."""
        session.add(record)

    async def mark_incomplete(
        self, session: AsyncSession, tenant_id: str, response_id: str, reason: str
    ) -> None:
        await session.execute(
            update(ResponseRecord)
            .where(self.tenant_clause(tenant_id), ResponseRecord.id == response_id)
            .values(status="incomplete", incomplete_reason=reason)
        )


response_repository = ResponseRepository(ResponseRecord)
