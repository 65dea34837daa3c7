"""One user's retrieval index, kept in step with their memories row by row.

- Rows are in (created_at, id) order, as the database gives them, so an index brought up to date
  ranks exactly as one built from scratch.
- Vectors: a float32 matrix of unit rows (zeros where a memory has no vector yet), read from the
  rows' float32 blobs in one ``np.frombuffer``; a new or changed memory appends or replaces its
  row, a removed one drops it.
- BM25 (bm25s) cannot take a new document: the index keeps every memory's tokens and a BM25
  snapshot of some earlier contents. A new or changed memory is *pending* until a new snapshot
  is built from the kept tokens (off the request path, index_refresh.py); meanwhile the snapshot
  scores the memories it holds and a pending one scores 0, unless the query shares a term with a
  pending memory: then the snapshot is rebuilt before that query (``needs_lexical``).
- ``facts``: the user's active key/value facts, not retrieved but counted by the signature.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from app.core.lazy_module import lazy_module
from app.embedders.embedder import unit_rows
from app.memories.lexical import LexicalIndex, tokenize

if TYPE_CHECKING:
    import numpy as np

    from app.memories.repository import IndexColumns
else:
    np = lazy_module("numpy", globals(), "np")

T = TypeVar("T")

__all__ = ["Candidate", "MemoryRow", "UserIndex", "epoch"]


def epoch(when: datetime) -> float:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _sort_time(when: datetime) -> datetime:
    """Comparable across naive (SQLite) and aware (PostgreSQL) values."""
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when


@dataclass(frozen=True, slots=True)
class Candidate:
    id: str
    content: str
    memory_type: str
    importance: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """A memory as the index reads it (``memory_repository.INDEX_COLUMNS``)."""

    id: str
    content: str
    memory_type: str
    importance: int
    created_at: datetime
    updated_at: datetime
    embedding: bytes | None = None
    embedding_model: str | None = None
    key: str | None = None
    active: bool = True

    @classmethod
    def of(cls, row: IndexColumns) -> MemoryRow:
        return cls(
            row.id,
            row.content,
            row.memory_type,
            row.importance,
            row.created_at,
            row.updated_at,
            row.embedding,
            row.embedding_model,
            row.key,
            row.superseded_by is None,
        )


class UserIndex:
    """Mutated only on the event loop, by one refresh at a time (index_refresh.py); a query
    reads it without awaiting in between, so it always sees one consistent state."""

    def __init__(self, embedder_name: str | None) -> None:
        self.embedder_name = embedder_name
        self.candidates: list[Candidate] = []
        self.importance = np.zeros(0)
        self.timestamps = np.zeros(0)
        self.width: int | None = None
        self.matrix: np.ndarray | None = None  # unit rows; zeros where has_vector is False
        self.has_vector = np.zeros(0, dtype=bool)
        self.facts: set[str] = set()
        self.rebuilding = False  # a BM25 snapshot is being built in the background
        self.embedding_rest = False  # missing vectors are being computed in the background
        self._keys: list[tuple[datetime, str]] = []
        self._position: dict[str, int] = {}
        self._tokens: list[list[str]] = []
        self.lexical = LexicalIndex(())
        self._lexical_rows = np.zeros(0, dtype=np.int64)  # snapshot row -> position, or -1
        self._pending: dict[str, frozenset[str]] = {}  # not in the snapshot: id -> terms

    # ---- building and updating ---------------------------------------------------------
    @classmethod
    def build(
        cls,
        rows: Iterable[IndexColumns | MemoryRow],
        embedder_name: str | None,
        facts: Iterable[str] = (),
    ) -> UserIndex:
        """From the rows (repository rows or ``MemoryRow``), BM25 snapshot included."""
        index = cls(embedder_name)
        index.apply([row if isinstance(row, MemoryRow) else MemoryRow.of(row) for row in rows])
        index.facts = set(facts)
        ids, contents, tokens = index.lexical_snapshot()
        index.install_lexical(ids, contents, LexicalIndex.from_tokens(tokens))
        return index

    @property
    def count(self) -> int:
        """The active memories this index knows of, facts included (the signature's count)."""
        return len(self.candidates) + len(self.facts)

    @property
    def lexical_stale(self) -> bool:
        """The BM25 snapshot lacks a memory, or holds one no longer there (its statistics)."""
        return bool(self._pending) or bool((self._lexical_rows < 0).any())

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._position

    def apply(self, rows: Sequence[MemoryRow]) -> None:
        """Bring these rows up to date: add or replace the active free-text ones, drop the
        rest (superseded, or facts), keep the row order."""
        added: dict[str, MemoryRow] = {}
        dropped: set[int] = set()
        retokenize: list[int] = []
        for row in rows:
            position = self._position.get(row.id)
            if row.key is not None or not row.active:
                if row.key is not None and row.active:
                    self.facts.add(row.id)
                else:
                    self.facts.discard(row.id)
                if position is not None:
                    dropped.add(position)
                added.pop(row.id, None)
            elif position is None:
                added[row.id] = row
            elif self._replace(position, row):
                retokenize.append(position)
        if retokenize:
            tokens = tokenize([self.candidates[i].content for i in retokenize])
            for position, terms in zip(retokenize, tokens, strict=True):
                self._tokens[position] = terms
                self._pending[self.candidates[position].id] = frozenset(terms)
                self._lexical_rows[self._lexical_rows == position] = -1
        if added or dropped:
            self._reshape(dropped, list(added.values()))

    def retain(self, active: set[str], facts: set[str]) -> None:
        """Drop the memories no longer active (deleted: no row says so, the count does)."""
        self.facts = set(facts)
        gone = {i for i, c in enumerate(self.candidates) if c.id not in active}
        if gone:
            self._reshape(gone, [])

    def missing_vectors(self, limit: int) -> list[Candidate]:
        return [self.candidates[i] for i in np.flatnonzero(~self.has_vector)[:limit]]

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Computed vectors (unit rows) of memories still in the index."""
        if not len(ids) or vectors.ndim != 2:
            return
        if self.width is None:
            self._allocate(vectors.shape[1])
        if vectors.shape[1] != self.width or self.matrix is None:
            return
        for memory_id, vector in zip(ids, vectors, strict=True):
            position = self._position.get(memory_id)
            if position is not None:
                self.matrix[position] = vector
                self.has_vector[position] = True

    def semantic_matrix(self) -> np.ndarray | None:
        """The vectors, or None when no memory has one (BM25 alone then)."""
        return self.matrix if self.matrix is not None and self.has_vector.any() else None

    # ---- BM25 --------------------------------------------------------------------------
    def needs_lexical(self, query: str) -> bool:
        """Whether ``query`` shares a term with a memory the BM25 snapshot lacks."""
        if not self._pending:
            return False
        terms = set(tokenize([query])[0])
        return any(not terms.isdisjoint(pending) for pending in self._pending.values())

    def lexical_snapshot(self) -> tuple[list[str], list[str], list[list[str]]]:
        """(ids, contents, tokens) of every memory now, to build a BM25 snapshot from."""
        return (
            [c.id for c in self.candidates],
            [c.content for c in self.candidates],
            list(self._tokens),
        )

    def install_lexical(self, ids: list[str], contents: list[str], lexical: LexicalIndex) -> None:
        """A BM25 snapshot of ``lexical_snapshot()`` taken earlier: map its rows to the
        memories as they are now (a row whose memory changed or left since maps to none)."""
        rows = np.full(len(ids), -1, dtype=np.int64)
        held: dict[str, str] = {}
        for row, (memory_id, content) in enumerate(zip(ids, contents, strict=True)):
            position = self._position.get(memory_id)
            if position is not None and self.candidates[position].content == content:
                rows[row] = position
                held[memory_id] = content
        self.lexical = lexical
        self._lexical_rows = rows
        self._pending = {
            c.id: frozenset(self._tokens[i])
            for i, c in enumerate(self.candidates)
            if c.id not in held
        }

    def lexical_scores(self, query: str, *, strong: bool) -> tuple[np.ndarray, np.ndarray]:
        """(raw BM25, strong lexical match) per memory, from the snapshot (pending: 0)."""
        raw = np.zeros(len(self.candidates))
        matches = np.zeros(len(self.candidates), dtype=bool)
        snapshot_raw = self.lexical.raw(query)
        rows = self._lexical_rows
        held = rows >= 0
        raw[rows[held]] = snapshot_raw[held]
        if strong:
            matches[rows[held]] = self.lexical.strong(query, snapshot_raw)[held]
        return raw, matches

    # ---- internals ---------------------------------------------------------------------
    def _stored_vector(self, row: MemoryRow) -> np.ndarray | None:
        blob = row.embedding
        if not blob or row.embedding_model != self.embedder_name or len(blob) % 4:
            return None
        if self.width is not None and len(blob) != self.width * 4:
            return None
        vector: np.ndarray = unit_rows(np.frombuffer(blob, dtype="<f4"))[0]
        return vector

    def _allocate(self, width: int) -> None:
        self.width = width
        self.matrix = np.zeros((len(self.candidates), width), dtype=np.float32)
        self.has_vector = np.zeros(len(self.candidates), dtype=bool)

    def _replace(self, position: int, row: MemoryRow) -> bool:
        """Returns whether the content changed (its tokens must be computed again)."""
        before = self.candidates[position]
        self.candidates[position] = Candidate(
            row.id, row.content, row.memory_type, row.importance, row.updated_at
        )
        self.importance[position] = row.importance
        self.timestamps[position] = epoch(row.updated_at)
        changed = row.content != before.content
        vector = self._stored_vector(row)
        if vector is not None:
            if self.matrix is None:
                self._allocate(vector.shape[0])
            assert self.matrix is not None
            self.matrix[position] = vector
            self.has_vector[position] = True
        elif changed and self.matrix is not None:  # the old vector says the old content
            self.matrix[position] = 0.0
            self.has_vector[position] = False
        return changed

    def _new_vectors(self, rows: Sequence[MemoryRow]) -> tuple[np.ndarray | None, np.ndarray]:
        """The added rows' stored vectors, one concatenated buffer and one frombuffer."""
        usable: list[int] = []
        for i, row in enumerate(rows):
            blob = row.embedding
            if blob and row.embedding_model == self.embedder_name and not len(blob) % 4:
                if self.width is None:
                    self._allocate(len(blob) // 4)
                if len(blob) == (self.width or 0) * 4:
                    usable.append(i)
        mask = np.zeros(len(rows), dtype=bool)
        if self.width is None:
            return None, mask
        vectors = np.zeros((len(rows), self.width), dtype=np.float32)
        if usable:
            blob = b"".join(rows[i].embedding or b"" for i in usable)
            stored = np.frombuffer(blob, dtype="<f4").reshape(len(usable), self.width)
            vectors[usable] = unit_rows(stored)
            mask[usable] = True
        return vectors, mask

    def _reshape(self, dropped: set[int], added: list[MemoryRow]) -> None:
        """Drop and add rows, then (only if needed) sort into (created_at, id) order."""
        size = len(self.candidates)
        keep_mask = np.ones(size, dtype=bool)
        keep_mask[list(dropped)] = False
        keep = np.flatnonzero(keep_mask)
        for i in dropped:
            self._pending.pop(self.candidates[i].id, None)
        new_vectors, new_mask = self._new_vectors(added)
        fresh = tokenize([row.content for row in added]) if added else []
        for row, terms in zip(added, fresh, strict=True):
            self._pending[row.id] = frozenset(terms)
        # New position of each old row (-1: dropped), as the snapshot's rows point to them.
        moved = np.full(size, -1, dtype=np.int64)
        moved[keep] = np.arange(keep.size)

        keys = [self._keys[i] for i in keep] if dropped else self._keys
        additions = [(_sort_time(row.created_at), row.id) for row in added]
        in_order = not additions or (
            additions == sorted(additions) and (not keys or additions[0] >= keys[-1])
        )
        keys = keys + additions
        order = None if in_order else np.asarray(sorted(range(len(keys)), key=keys.__getitem__))

        def arranged(values: list[T]) -> list[T]:
            return values if order is None else [values[i] for i in order]

        def arranged_array(values: np.ndarray) -> np.ndarray:
            return values if order is None else values[order]

        kept = (lambda values: [values[i] for i in keep]) if dropped else list
        self._keys = arranged(keys)
        self.candidates = arranged(
            kept(self.candidates)
            + [Candidate(r.id, r.content, r.memory_type, r.importance, r.updated_at) for r in added]
        )
        self._tokens = arranged(kept(self._tokens) + fresh)
        self.importance = arranged_array(
            np.concatenate([self.importance[keep], [float(r.importance) for r in added]])
        )
        self.timestamps = arranged_array(
            np.concatenate([self.timestamps[keep], [epoch(r.updated_at) for r in added]])
        )
        if self.matrix is None or new_vectors is None:  # no vector anywhere yet
            self.has_vector = np.zeros(len(self.candidates), dtype=bool)
        else:
            self.matrix = arranged_array(np.concatenate([self.matrix[keep], new_vectors]))
            self.has_vector = arranged_array(np.concatenate([self.has_vector[keep], new_mask]))
        if order is not None:  # where each row of the concatenation went
            placed = np.empty(order.size, dtype=np.int64)
            placed[order] = np.arange(order.size)
            moved = np.where(moved >= 0, placed[np.maximum(moved, 0)], -1)
        rows = self._lexical_rows
        if size:
            self._lexical_rows = np.where(rows >= 0, moved[np.maximum(rows, 0)], -1)
        if dropped or order is not None:
            self._position = {c.id: i for i, c in enumerate(self.candidates)}
        else:
            for i in range(size, len(self.candidates)):
                self._position[self.candidates[i].id] = i
