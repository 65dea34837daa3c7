"""Every SQL query about long-term memories; scoped by tenant, no HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, cast

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Memory
from app.db.repository import TenantRepository

__all__ = [
    "INDEX_COLUMNS",
    "IndexColumns",
    "MemoryRepository",
    "MemorySignature",
    "memory_repository",
]

_IN_CHUNK = 500

# What a retrieval index reads of a memory (app/memories/memory_index.py, ``MemoryRow``).
INDEX_COLUMNS = (
    Memory.id,
    Memory.content,
    Memory.memory_type,
    Memory.importance,
    Memory.created_at,
    Memory.updated_at,
    Memory.embedding,
    Memory.embedding_model,
    Memory.key,
    Memory.superseded_by,
)


class IndexColumns(Protocol):
    """A row of ``INDEX_COLUMNS`` (SQLAlchemy's Row, read by column name)."""

    @property
    def id(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def memory_type(self) -> str: ...
    @property
    def importance(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def embedding(self) -> bytes | None: ...
    @property
    def embedding_model(self) -> str | None: ...
    @property
    def key(self) -> str | None: ...
    @property
    def superseded_by(self) -> str | None: ...


MemorySignature = tuple[int, datetime | None]
"""(active memories, the latest update): changes whenever the user's active memories do."""


class MemoryRepository(TenantRepository[Memory]):
    # ---- long-term memories -------------------------------------------------------------
    async def memories(
        self, session: AsyncSession, tenant_id: str, user: str, *, active_only: bool = True
    ) -> list[Memory]:
        statement = self.base_statement(tenant_id).where(Memory.user_id == user)
        if active_only:
            statement = statement.where(Memory.superseded_by.is_(None))
        statement = statement.order_by(Memory.created_at, Memory.id)
        return list((await session.execute(statement)).scalars())

    async def memory_rows(
        self, session: AsyncSession, tenant_id: str, user: str, ids: Sequence[str] | None = None
    ) -> list[IndexColumns]:
        """The active free-text memories' retrieval columns (``INDEX_COLUMNS``; no ORM objects:
        cheaper for 10,000s), or those of ``ids`` among them."""
        statement = (
            select(*INDEX_COLUMNS)
            .where(
                self.tenant_clause(tenant_id),
                Memory.user_id == user,
                Memory.superseded_by.is_(None),
                Memory.key.is_(None),  # key/value facts are injected in full, not retrieved
            )
            .order_by(Memory.created_at, Memory.id)
        )
        if ids is None:
            return cast("list[IndexColumns]", list((await session.execute(statement)).all()))
        rows: list[IndexColumns] = []
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = statement.where(Memory.id.in_(ids[start : start + _IN_CHUNK]))
            rows.extend(cast("list[IndexColumns]", (await session.execute(chunk)).all()))
        return rows

    async def memory_changes(
        self, session: AsyncSession, tenant_id: str, user: str, since: datetime
    ) -> list[IndexColumns]:
        """Every memory of the user updated at or after ``since``, superseded ones and facts
        included (``INDEX_COLUMNS``): what a retrieval index must apply to catch up."""
        statement = (
            select(*INDEX_COLUMNS)
            .where(
                self.tenant_clause(tenant_id),
                Memory.user_id == user,
                Memory.updated_at >= since,
            )
            .order_by(Memory.created_at, Memory.id)
        )
        return cast("list[IndexColumns]", list((await session.execute(statement)).all()))

    async def active_memory_ids(
        self, session: AsyncSession, tenant_id: str, user: str, *, facts: bool
    ) -> list[str]:
        """The ids of the user's active free-text memories (``facts``: of their facts)."""
        statement = select(Memory.id).where(
            self.tenant_clause(tenant_id),
            Memory.user_id == user,
            Memory.superseded_by.is_(None),
            Memory.key.is_not(None) if facts else Memory.key.is_(None),
        )
        return list((await session.execute(statement)).scalars())

    async def memory_signature(
        self, session: AsyncSession, tenant_id: str, user: str
    ) -> MemorySignature:
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
            self.tenant_clause(tenant_id),
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
