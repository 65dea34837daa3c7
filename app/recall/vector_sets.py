"""Message vectors as message recall reads them: a conversation's, loaded incrementally and kept
in a small LRU cache, and the newest of a user's other conversations (search.py searches both).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.lazy_module import lazy_module
from app.db.models import MessageVector
from app.db.repository import vector_scope
from app.embedders.embedder import decode_vector

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy", globals(), "np")

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
# A conversation's cached vectors are read again after this long even when they cover what a
# search needs: another worker or replica may have stored some meanwhile.
REFRESH_S = 30.0


@dataclass(slots=True)
class VectorSet:
    """A conversation's message vectors for one embedder, loaded incrementally by row id.

    The rows live in buffers that grow by doubling, and ``matrix``, ``message_ids`` and
    ``sequences`` are views of their filled part: adding a turn's two vectors to 10,000 copied
    15 MB each time (~1 ms, and the next search read a matrix no cache held)."""

    model: str
    last_id: int = 0
    max_sequence: int = -1  # of every row seen, with or without a vector
    read_at: float = -REFRESH_S  # monotonic time of the last read from the database
    _known: set[int] = field(default_factory=set)  # message ids in the matrix
    _count: int = 0
    _ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _sequences: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _matrix: np.ndarray | None = None

    @property
    def size(self) -> int:
        return self._count

    @property
    def message_ids(self) -> np.ndarray:
        return self._ids[: self._count]

    @property
    def sequences(self) -> np.ndarray:
        return self._sequences[: self._count]

    @property
    def matrix(self) -> np.ndarray | None:
        return None if self._matrix is None else self._matrix[: self._count]

    def covers(self, sequence: int) -> bool:
        """Whether every vector up to ``sequence`` is here without reading (recently read,
        and this process stored the newer ones itself)."""
        return self.max_sequence >= sequence and time.monotonic() - self.read_at < REFRESH_S

    def extend(self, rows: Sequence[VectorColumns]) -> None:
        """Rows read from ``message_vectors`` (ordered by id)."""
        if rows:
            self.last_id = max(self.last_id, max(int(r.id) for r in rows))
        self._add(
            [
                (int(r.message_id), int(r.sequence_number), decode_vector(r.embedding))
                if r.embedding is not None and r.embedding_model == self.model
                else (int(r.message_id), int(r.sequence_number), None)
                for r in rows
            ]
        )

    def _add(self, items: Sequence[tuple[int, int, np.ndarray | None]]) -> None:
        if items:
            self.max_sequence = max(self.max_sequence, max(seq for _, seq, _ in items))
        usable = [item for item in items if item[2] is not None and item[0] not in self._known]
        if not usable:
            return
        vectors = np.stack([vector for _, _, vector in usable if vector is not None])
        if self._matrix is not None and self._matrix.shape[1] != vectors.shape[1]:
            return
        start, end = self._count, self._count + len(usable)
        self._reserve(end, vectors.shape[1], vectors.dtype)
        assert self._matrix is not None
        self._matrix[start:end] = vectors
        self._ids[start:end] = [message_id for message_id, _, _ in usable]
        self._sequences[start:end] = [sequence for _, sequence, _ in usable]
        self._count = end
        self._known.update(message_id for message_id, _, _ in usable)

    def _reserve(self, rows: int, width: int, dtype: np.dtype) -> None:
        """Room for ``rows`` rows, doubling. Rows already filled are never written again, so a
        view taken before (a search's ``matrix``) keeps what it saw."""
        capacity = self._ids.shape[0]
        if self._matrix is not None and rows <= capacity:
            return
        capacity = max(rows, 2 * capacity, 16)
        matrix = np.empty((capacity, width), dtype=dtype)
        ids = np.empty(capacity, dtype=np.int64)
        sequences = np.empty(capacity, dtype=np.int64)
        filled = self._count
        if self._matrix is not None:
            matrix[:filled] = self._matrix[:filled]
        ids[:filled] = self._ids[:filled]
        sequences[:filled] = self._sequences[:filled]
        self._matrix, self._ids, self._sequences = matrix, ids, sequences


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

    def stored(
        self,
        key: tuple[str, str, str],
        items: Sequence[tuple[int, int, np.ndarray | None]],
    ) -> None:
        """Vectors this process has just stored (message id, sequence, vector or None): a
        conversation already cached has them without reading them back."""
        found = self._sets.get(key)
        if found is not None:
            found._add(items)


_VECTOR_COLUMNS = (
    MessageVector.id,
    MessageVector.message_id,
    MessageVector.sequence_number,
    MessageVector.conversation_id,
    MessageVector.embedding,
    MessageVector.embedding_model,
)


class VectorColumns(Protocol):
    """A row of ``_VECTOR_COLUMNS`` (SQLAlchemy's Row, read by column name)."""

    @property
    def id(self) -> int: ...
    @property
    def message_id(self) -> int: ...
    @property
    def sequence_number(self) -> int: ...
    @property
    def conversation_id(self) -> str: ...
    @property
    def embedding(self) -> bytes | None: ...
    @property
    def embedding_model(self) -> str | None: ...


async def conversation_vectors(
    cache: VectorCache,
    session: AsyncSession,
    tenant_id: str,
    conversation_id: str,
    model: str,
    *,
    through: int | None = None,
) -> VectorSet:
    """The conversation's vectors: the cached set, read on from the last row seen; not read
    at all when it ``covers`` every message up to ``through`` (sequence)."""
    vectors = cache.get((tenant_id, conversation_id, model))
    if through is not None and vectors.covers(through):
        return vectors
    vectors.read_at = time.monotonic()
    statement = (
        select(*_VECTOR_COLUMNS)
        .where(
            MessageVector.conversation_id == conversation_id,
            vector_scope.tenant_clause(tenant_id),
            MessageVector.id > vectors.last_id,
        )
        .order_by(MessageVector.id)
    )
    vectors.extend(cast("list[VectorColumns]", (await session.execute(statement)).all()))
    return vectors


async def other_conversations(
    session: AsyncSession, tenant_id: str, user: str, conversation_id: str, model: str
) -> list[VectorColumns]:
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
    return cast("list[VectorColumns]", list((await session.execute(statement)).all()))


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
