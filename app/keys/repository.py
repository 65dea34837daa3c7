"""Every SQL query about virtual keys and what they spent."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ApiKey, RequestLog
from app.db.repository import TenantRepository

__all__ = ["KeyRepository", "key_repository"]

_request_logs = TenantRepository(RequestLog)


class KeyRepository:
    async def by_hash(self, session: AsyncSession, key_hash: str) -> ApiKey | None:
        statement = select(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        return (await session.execute(statement)).scalar_one_or_none()

    async def get(self, session: AsyncSession, key_id: str) -> ApiKey | None:
        statement = select(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        return (await session.execute(statement)).scalar_one_or_none()

    async def list_active(self, session: AsyncSession) -> list[ApiKey]:
        statement = (
            select(ApiKey).where(ApiKey.revoked_at.is_(None)).order_by(ApiKey.created_at, ApiKey.id)
        )
        return list((await session.execute(statement)).scalars())

    async def add(self, session: AsyncSession, key: ApiKey) -> ApiKey:
        session.add(key)
        await session.flush()
        return key

    async def spend(
        self, session: AsyncSession, tenant_id: str, key_id: str
    ) -> tuple[float, float]:
        """(total spent, the most one request cost) by this key, in USD, from the request log."""
        statement = select(
            func.coalesce(func.sum(RequestLog.total_cost), 0.0),
            func.coalesce(func.max(RequestLog.total_cost), 0.0),
        ).where(_request_logs.tenant_clause(tenant_id), RequestLog.key_id == key_id)
        total, largest = (await session.execute(statement)).one()
        return float(total), float(largest)

    async def spends(self, session: AsyncSession, keys: list[ApiKey]) -> dict[str, float]:
        """What each key spent in its own tenant, in USD (the request log's total_cost, prompt
        caches priced at their own rates), by key id."""
        if not keys:
            return {}
        statement = (
            select(
                RequestLog.key_id,
                RequestLog.tenant_id,
                func.coalesce(func.sum(RequestLog.total_cost), 0.0),
            )
            .where(RequestLog.key_id.in_([key.id for key in keys]))
            .group_by(RequestLog.key_id, RequestLog.tenant_id)
        )
        tenants = {key.id: key.tenant_id for key in keys}
        rows = (await session.execute(statement)).all()
        return {str(k): float(usd) for k, tenant, usd in rows if tenants.get(str(k)) == tenant}


key_repository = KeyRepository()
