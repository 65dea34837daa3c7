"""Every SQL query about stored responses; scoped by tenant, no HTTP."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ResponseRecord

__all__ = ["ResponseRepository", "response_repository"]


class ResponseRepository:
    async def get(
        self, session: AsyncSession, tenant_id: str, response_id: str
    ) -> ResponseRecord | None:
        statement = select(ResponseRecord).where(
            ResponseRecord.id == response_id, ResponseRecord.tenant_id == tenant_id
        )
        return (await session.execute(statement)).scalar_one_or_none()

    def add(self, session: AsyncSession, record: ResponseRecord) -> None:
        session.add(record)

    async def delete(self, session: AsyncSession, tenant_id: str, response_id: str) -> bool:
        statement = delete(ResponseRecord).where(
            ResponseRecord.id == response_id, ResponseRecord.tenant_id == tenant_id
        )
        result = await session.execute(statement)
        return bool(getattr(result, "rowcount", 0))


response_repository = ResponseRepository()
