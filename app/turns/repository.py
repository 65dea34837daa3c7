"""Every SQL query of the turn pipeline outside conversations: the request log and the
Idempotency-Key records (both tenant-scoped through ``TenantRepository``)."""

from __future__ import annotations

from typing import Required, TypedDict, cast

from sqlalchemy import ColumnElement, Table, delete, insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import IdempotencyRecord, RequestLog
from app.db.repository import TenantRepository, execute_core
from app.wire.json import JSONObject

__all__ = [
    "IdempotencyRepository",
    "RequestLogValues",
    "RequestLogRepository",
    "idempotency_repository",
    "request_log_repository",
]

# Built once: the request log is written on every turn.
_INSERT_REQUEST_LOG = insert(cast(Table, RequestLog.__table__))


class RequestLogValues(TypedDict, total=False):
    """A ``request_logs`` row as a request writes it (app/db/models ``RequestLog``; a column
    left out takes its default)."""

    id: Required[str]
    tenant_id: Required[str]
    key_id: Required[str | None]
    conversation_id: str | None
    model: Required[str]
    stream: bool
    status: Required[str]
    status_code: Required[int]
    error: str | None
    prompt_tokens: Required[int]
    completion_tokens: int
    prompt_cost: Required[float]
    completion_cost: float
    planning_cost: float
    total_cost: Required[float]
    latency_ms: Required[float]
    context_utilization: JSONObject  # ContextUtilization.model_dump(mode="json")


class RequestLogRepository(TenantRepository[RequestLog]):
    async def insert(self, session: AsyncSession, row: RequestLogValues) -> None:
        """A plain INSERT on the session's connection: no unit of work to flush."""
        await execute_core(session, _INSERT_REQUEST_LOG, row)


class IdempotencyRepository(TenantRepository[IdempotencyRecord]):
    def _key_clause(
        self, tenant_id: str, key: str
    ) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
        return self.tenant_clause(tenant_id), IdempotencyRecord.idempotency_key == key

    async def by_key(
        self, session: AsyncSession, tenant_id: str, key: str, *, for_update: bool = False
    ) -> IdempotencyRecord | None:
        statement = self.base_statement(tenant_id).where(IdempotencyRecord.idempotency_key == key)
        if for_update:
            statement = statement.with_for_update()
        return (await session.execute(statement)).scalar_one_or_none()

    async def delete_pending(self, session: AsyncSession, tenant_id: str, key: str) -> None:
        await session.execute(
            delete(IdempotencyRecord).where(
                *self._key_clause(tenant_id, key), IdempotencyRecord.status == "pending"
            )
        )


request_log_repository = RequestLogRepository(RequestLog)
idempotency_repository = IdempotencyRepository(IdempotencyRecord)
