"""Key/value facts about a user (seed 004): one active value per key, history kept.

``POST /v1/memories`` with ``key`` and ``value`` upserts: the same value again only refreshes
the fact; a new value is stored as a new memory and the old one is marked superseded by it
(still listed with ``include_superseded``). Facts are never retrieved by similarity: they are
injected in full, ahead of retrieved memories, within the memory token cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Memory, utcnow
from app.memories.repository import memory_repository as repository

__all__ = ["FactUpsert", "FactValue", "fact_content", "upsert_fact"]


@dataclass(frozen=True, slots=True)
class FactUpsert:
    memory: Memory
    outcome: str  # "created" | "updated" (old value superseded) | "unchanged"
    superseded: str | None = None


def fact_content(key: str, value: str) -> str:
    """How a fact reads where it is shown or injected."""
    return f"{key}: {value}"


@dataclass(frozen=True, slots=True)
class FactValue:
    """A fact as ``POST /v1/memories`` sends it: its key, its value, how it is typed."""

    key: str
    value: str
    memory_type: str = "fact"
    importance: int = 5


async def upsert_fact(
    session: AsyncSession, tenant_id: str, user: str, sent: FactValue
) -> FactUpsert:
    key, value = sent.key, sent.value
    memory_type, importance = sent.memory_type, sent.importance
    now = utcnow()
    current = await repository.facts(session, tenant_id, user, key)
    if current and current[0].content == value:
        fact = current[0]
        fact.memory_type = memory_type
        fact.importance = importance
        fact.updated_at = now
        await session.flush()
        return FactUpsert(fact, "unchanged")
    fact = Memory(
        tenant_id=tenant_id,
        user_id=user,
        key=key,
        content=value,
        memory_type=memory_type,
        importance=importance,
        confidence=1.0,
        source="api",
        created_at=now,
        updated_at=now,
    )
    session.add(fact)
    await session.flush()
    old = [m.id for m in current]
    if old:
        await repository.supersede(session, tenant_id, user, old, fact.id, now)
    return FactUpsert(fact, "updated" if old else "created", old[0] if old else None)
