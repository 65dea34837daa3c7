"""Message vectors as message recall reads them: a conversation's, loaded incrementally and kept
in a small LRU cache, and the newest of a user's other conversations (recall.py searches both).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MessageVector
from app.db.repository import vector_scope
from app.memories.embedder import decode_vector

__all__ = [
    "CROSS_SESSION_FETCH",
    "CROSS_SESSION_ROLES",
    "Hits",
    "VectorCache",
    "VectorSet",
    "conversation_vectors",
    "other_conversations",
]

CROSS_SESSION_FETCH = 200  # the seed's vector fetch limit for other conversations
# Another conversation's tool results are its own working data, never recalled elsewhere.
CROSS_SESSION_ROLES = ("user", "assistant")
_CACHE_SIZE = 256


@dataclass(slots=True)
class VectorSet:
    """A conversation's message vectors for one embedder, loaded incrementally by row id."""

    model: str
    last_id: int = 0
    message_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sequences: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    matrix: np.ndarray | None = None

    max_sequence: int = -1  # of every row seen, with or without a vector

    @property
    def size(self) -> int:
        return int(self.message_ids.shape[0])

    def extend(self, rows: Sequence[Any]) -> None:
        usable = [r for r in rows if r.embedding is not None and r.embedding_model == self.model]
        if rows:
            self.last_id = max(self.last_id, max(int(r.id) for r in rows))
            self.max_sequence = max(self.max_sequence, max(int(r.sequence_number) for r in rows))
        if not usable:
            return
        vectors = np.stack([decode_vector(r.embedding) for r in usable])
        if self.matrix is not None and self.matrix.shape[1] != vectors.shape[1]:
            return
        self.matrix = vectors if self.matrix is None else np.vstack([self.matrix, vectors])
        self.message_ids = np.concatenate(
            [self.message_ids, np.asarray([r.message_id for r in usable], dtype=np.int64)]
        )
        self.sequences = np.concatenate(
            [self.sequences, np.asarray([r.sequence_number for r in usable], dtype=np.int64)]
        )


class VectorCache:
    """(tenant, conversation, embedder) -> VectorSet, least recently used out."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._sets: OrderedDict[tuple[str, str, str], VectorSet] = OrderedDict()

    def get(self, key: tuple[str, str, str]) -> VectorSet:
        found = self._sets.get(key)
        if found is None:
            found = VectorSet(model=key[2])
            self._sets[key] = found
        self._sets.move_to_end(key)
        while len(self._sets) > self._size:
            self._sets.popitem(last=False)
        return found


_VECTOR_COLUMNS = (
    MessageVector.id,
    MessageVector.message_id,
    MessageVector.sequence_number,
    MessageVector.conversation_id,
    MessageVector.embedding,
    MessageVector.embedding_model,
)


async def conversation_vectors(
    cache: VectorCache,
    session: AsyncSession,
    tenant_id: str,
    conversation_id: str,
    model: str,
) -> VectorSet:
    vectors = cache.get((tenant_id, conversation_id, model))
    statement = (
        select(*_VECTOR_COLUMNS)
        .where(
            MessageVector.conversation_id == conversation_id,
            vector_scope.tenant_clause(tenant_id),
            MessageVector.id > vectors.last_id,
        )
        .order_by(MessageVector.id)
    )
    vectors.extend((await session.execute(statement)).all())
    return vectors


async def other_conversations(
    session: AsyncSession, tenant_id: str, user: str, conversation_id: str, model: str
) -> list[Any]:
    statement = (
        select(*_VECTOR_COLUMNS)
        .where(
            vector_scope.tenant_clause(tenant_id),
            MessageVector.user_id == user,
            MessageVector.conversation_id != conversation_id,
            MessageVector.role.in_(CROSS_SESSION_ROLES),
            MessageVector.embedding_model == model,
            MessageVector.embedding.is_not(None),
        )
        .order_by(MessageVector.id.desc())
        .limit(CROSS_SESSION_FETCH)
    )
    return list((await session.execute(statement)).all())


@dataclass(slots=True)
class Hits:
    message_ids: list[int] = field(default_factory=list)
    similarities: list[float] = field(default_factory=list)

    def add(self, ids: np.ndarray, cosine: np.ndarray, minimum: float) -> None:
        keep = np.flatnonzero(cosine >= minimum)
        self.message_ids.extend(int(i) for i in ids[keep])
        self.similarities.extend(float(c) for c in cosine[keep])

    def best(self, top_k: int) -> list[tuple[int, float]]:
        pairs = sorted(zip(self.message_ids, self.similarities, strict=True), key=lambda p: -p[1])
        seen: set[int] = set()
        chosen: list[tuple[int, float]] = []
        for message_id, similarity in pairs:
            if message_id not in seen:
                seen.add(message_id)
                chosen.append((message_id, similarity))
            if len(chosen) >= top_k:
                break
        return chosen
