"""The tenant filter, written once: a base for every repository of a tenant-owned table.

Like Polar's ``RepositoryBase.get_base_statement()``: a repository starts its queries from
``base_statement(tenant_id)`` (or adds ``tenant_clause(tenant_id)``), so no query of a
tenant-owned table can forget whose rows it reads. ``get``, ``get_many``, ``add`` and
``delete`` come with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, TypeVarTuple, overload

from sqlalchemy import (
    BindParameter,
    Column,
    ColumnElement,
    CursorResult,
    Executable,
    Select,
    select,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import QueryableAttribute, Session
from sqlalchemy.sql.selectable import TypedReturnsRows

from app.db.models.base import Base
from app.db.models.conversation import Conversation
from app.db.models.memory import Memory
from app.db.models.message import Message
from app.db.models.message_vector import MessageVector
from app.db.sqlite_core import run_inline

__all__ = [
    "CoreParameters",
    "CoreResult",
    "TenantRepository",
    "TenantScope",
    "conversation_scope",
    "execute_core",
    "memory_scope",
    "message_scope",
    "scoped",
    "vector_scope",
]


M = TypeVar("M", bound=Base)
S = TypeVar("S", bound=Select[Any])
_Ts = TypeVarTuple("_Ts")

CoreParameters = Mapping[str, object] | Sequence[Mapping[str, object]] | None
"""One row of bind parameters, or several (an executemany)."""


class CoreResult(Protocol[*_Ts]):
    """What the hot path reads of a Core statement's result (a ``CursorResult``, or the
    inline runner's on SQLite)."""

    @property
    def rowcount(self) -> int: ...

    def all(self) -> Sequence[tuple[*_Ts]]: ...


@overload
async def execute_core(
    session: AsyncSession,
    statement: TypedReturnsRows[*_Ts],
    parameters: CoreParameters = None,
) -> CoreResult[*_Ts]: ...


@overload
async def execute_core(
    session: AsyncSession, statement: Executable, parameters: CoreParameters = None
) -> CoreResult[*tuple[Any, ...]]: ...


async def execute_core(
    session: AsyncSession, statement: Executable, parameters: CoreParameters = None
) -> CoreResult[*tuple[Any, ...]]:
    """A Core statement on the session's connection, as fast as the database allows: on
    SQLite straight on its connection (app/db/sqlite_core.py), else
    ``(await session.connection()).execute(statement, parameters)`` in one trip into
    SQLAlchemy's greenlet instead of two, without the ``AsyncConnection`` proxy. The rows are
    fetched by then (no server-side cursor), so the result reads like any."""
    inline = await run_inline(session, statement, parameters)
    if inline is not None:
        return inline
    result: CursorResult[*tuple[Any, ...]] = await session.run_sync(
        _execute_core, statement, parameters
    )
    return result


def _execute_core(
    session: Session, statement: Executable, parameters: CoreParameters
) -> CursorResult[*tuple[Any, ...]]:
    return session.connection().execute(statement, parameters)  # type: ignore[arg-type]


class TenantScope(Generic[M]):
    """The tenant filter of a tenant-owned table, whatever its primary key (messages and their
    vectors are read in bulk by internal ids, never fetched by a client's id)."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.tenant_column: Column[str] = sa_inspect(model).columns["tenant_id"]

    def tenant_clause(self, tenant_id: str | BindParameter[str]) -> ColumnElement[bool]:
        """``tenant_id = :tenant``; a ``bindparam`` for statements built once (hot paths)."""
        return self.tenant_column == tenant_id


class TenantRepository(TenantScope[M]):
    """For a model with a string ``id`` primary key and a ``tenant_id`` column."""

    def __init__(self, model: type[M]) -> None:
        super().__init__(model)
        self.id_column: Column[str] = sa_inspect(model).columns["id"]

    def base_statement(self, tenant_id: str) -> Select[M]:
        """``SELECT model WHERE tenant_id = :tenant``: where every query starts."""
        return select(self.model).where(self.tenant_clause(tenant_id))

    async def get(
        self, session: AsyncSession, tenant_id: str, row_id: str, *, for_update: bool = False
    ) -> M | None:
        statement = self.base_statement(tenant_id).where(self.id_column == row_id)
        if for_update:
            statement = statement.with_for_update()
        return (await session.execute(statement)).scalar_one_or_none()

    async def get_many(
        self, session: AsyncSession, tenant_id: str, ids: Sequence[str]
    ) -> dict[str, M]:
        if not ids:
            return {}
        statement = select(self.id_column, self.model).where(
            self.tenant_clause(tenant_id), self.id_column.in_(list(set(ids)))
        )
        return dict((await session.execute(statement)).tuples().all())

    async def add(self, session: AsyncSession, row: M) -> M:
        session.add(row)
        await session.flush()
        return row

    async def delete(self, session: AsyncSession, row: M) -> None:
        await session.delete(row)


# The tenant filters of tables read outside their repositories (memory recall's bulk reads).
conversation_scope = TenantScope(Conversation)
memory_scope = TenantScope(Memory)
message_scope = TenantScope(Message)
vector_scope = TenantScope(MessageVector)


def scoped(
    statement: S, tenant_column: ColumnElement[str] | QueryableAttribute[str], tenant_id: str | None
) -> S:
    """``statement`` limited to one tenant, or left whole for ``None`` (the operator's view:
    the CLI, or the master key on /ui; only the inspector asks for it)."""
    return statement if tenant_id is None else statement.where(tenant_column == tenant_id)
