"""Long-term memories of a user: add (restatements update, contradictions supersede), list,
delete, forget. Every call is scoped by the caller's tenant."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound, RateLimited
from app.core.lazy_module import lazy_module
from app.db.models import Memory, utcnow
from app.embedders.embedder import decode_vector, encode_vector
from app.memories.repository import memory_repository as repository

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = ["MemoryQuotaExceeded", "MemoryService", "NewMemory", "memory_service", "text_similarity"]

_WORDS = re.compile(r"\w+")


def text_similarity(a: str, b: str) -> float:
    """Jaccard similarity of the two texts' lowercase word sets."""
    left, right = set(_WORDS.findall(a.lower())), set(_WORDS.findall(b.lower()))
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def _cosine(a: list[float], stored: bytes) -> float:
    """Cosine of a new vector and a stored one (float32 blob)."""
    b = decode_vector(stored).tolist()
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _blob(vector: list[float] | None) -> bytes | None:
    return encode_vector(np.asarray(vector)) if vector is not None else None


@dataclass(slots=True)
class NewMemory:
    content: str
    memory_type: str = "note"
    importance: int = 5
    confidence: float = 1.0
    source: str = "api"
    conversation_id: str | None = None
    supersedes: tuple[str, ...] = ()
    embedding: list[float] | None = None
    embedding_model: str | None = None


class MemoryQuotaExceeded(RateLimited):
    default_code = "memory_quota_exceeded"


class MemoryService:
    def restated(self, existing: list[Memory], new: NewMemory, threshold: float) -> Memory | None:
        """The existing memory ``new`` says again (most similar at or above ``threshold``)."""
        best: Memory | None = None
        best_value = threshold
        for memory in existing:
            if (
                new.embedding is not None
                and memory.embedding is not None
                and memory.embedding_model == new.embedding_model
            ):
                value = _cosine(new.embedding, memory.embedding)
            else:
                value = text_similarity(new.content, memory.content)
            if value >= best_value:
                best, best_value = memory, value
        return best

    async def add(
        self,
        session: AsyncSession,
        tenant_id: str,
        user: str,
        new: NewMemory,
        *,
        dedupe_threshold: float,
        quota: int = 0,
    ) -> tuple[Memory, bool]:
        """Store ``new``; returns the memory and whether it was created (False: updated).

        ``quota`` (0: none): the tenant's active memories, all users; a new memory past it is
        ``MemoryQuotaExceeded`` (a restatement, which updates, is not new).
        """
        now = utcnow()
        existing = await repository.memories(session, tenant_id, user)
        existing = [m for m in existing if m.key is None]  # facts change only by their key
        current = self.restated(existing, new, dedupe_threshold)
        created = current is None
        if current is None:
            if quota and await repository.active_count(session, tenant_id) >= quota:
                raise MemoryQuotaExceeded(
                    f"This tenant has {quota} active memories, its quota; delete memories "
                    "(DELETE /v1/memories/{id} or ?user=) to store new ones.",
                )
            current = Memory(
                tenant_id=tenant_id,
                user_id=user,
                content=new.content,
                memory_type=new.memory_type,
                importance=new.importance,
                confidence=new.confidence,
                source=new.source,
                conversation_id=new.conversation_id,
                embedding=_blob(new.embedding),
                embedding_model=new.embedding_model if new.embedding is not None else None,
                created_at=now,
                updated_at=now,
            )
            session.add(current)
        else:
            if new.embedding is not None:
                current.embedding = _blob(new.embedding)
                current.embedding_model = new.embedding_model
            elif new.content != current.content:  # the old vector says the old content
                current.embedding = current.embedding_model = None
            current.content = new.content
            current.memory_type = new.memory_type
            current.importance = max(current.importance, new.importance)
            current.confidence = max(current.confidence, new.confidence)
            current.updated_at = now
        await session.flush()
        if new.supersedes:
            await repository.supersede(
                session, tenant_id, user, list(new.supersedes), current.id, now
            )
        return current, created

    async def list(
        self, session: AsyncSession, tenant_id: str, user: str, *, include_superseded: bool
    ) -> list[Memory]:
        return await repository.memories(
            session, tenant_id, user, active_only=not include_superseded
        )

    async def delete(self, session: AsyncSession, tenant_id: str, memory_id: str) -> None:
        memory = await repository.memory(session, tenant_id, memory_id)
        if memory is None:
            raise NotFound(f"No memory '{memory_id}'.", code="memory_not_found")
        await repository.delete_memory(session, memory)

    async def forget(self, session: AsyncSession, tenant_id: str, user: str) -> int:
        return await repository.forget_user(session, tenant_id, user)


memory_service = MemoryService()
