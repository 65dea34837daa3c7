"""Retrieve a user's long-term memories for a query.

score = similarity x importance/10 x recency decay (half-life), where similarity is the cosine of
embeddings when an embeddings model is configured (and the memory has one), else BM25 (bm25s)
squashed into [0, 1) as s / (s + 1). Memories under the threshold are dropped; the rest are taken
best first up to ``top_k`` and a token cap. A user's index is cached per process and rebuilt when
the (count, latest update) signature of their memories changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import bm25s
import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.state import AppState
from app.memories.embeddings import EmbeddingFailed, embed
from app.memories.repository import memory_repository

__all__ = [
    "Candidate",
    "LexicalIndex",
    "Retrieved",
    "UserIndex",
    "rank",
    "recency_decay",
    "retrieve",
    "score",
]

logger = logging.getLogger(__name__)


def recency_decay(age_days: float, half_life_days: float) -> float:
    return float(0.5 ** (max(0.0, age_days) / half_life_days))


def score(similarity: float, importance: int, age_days: float, half_life_days: float) -> float:
    return similarity * (importance / 10.0) * recency_decay(age_days, half_life_days)


@dataclass(frozen=True, slots=True)
class Candidate:
    id: str
    content: str
    memory_type: str
    importance: int
    updated_at: datetime
    embedding: tuple[float, ...] | None = None


@dataclass(frozen=True, slots=True)
class Retrieved:
    id: str
    content: str
    memory_type: str
    importance: int
    score: float
    similarity: float
    updated_at: datetime | None = None  # for the age in the injected line


def _tokenize(texts: list[str]) -> list[list[str]]:
    tokens: list[list[str]] = bm25s.tokenize(
        texts, stopwords="en", return_ids=False, show_progress=False
    )
    return tokens


class LexicalIndex:
    """BM25 over the memories' contents."""

    def __init__(self, contents: Sequence[str]) -> None:
        self.size = len(contents)
        self._bm25: bm25s.BM25 | None = None
        if contents:
            corpus = bm25s.tokenize(list(contents), stopwords="en", show_progress=False)
            self._bm25 = bm25s.BM25()
            self._bm25.index(corpus, show_progress=False)

    def similarities(self, query: str) -> np.ndarray:
        if self._bm25 is None:
            return np.zeros(self.size)
        vocab = self._bm25.vocab_dict
        terms = [t for t in _tokenize([query])[0] if t in vocab]
        if not terms:
            return np.zeros(self.size)
        raw = np.asarray(self._bm25.get_scores(terms), dtype=float)
        return np.asarray(raw / (raw + 1.0))


@dataclass(slots=True)
class UserIndex:
    candidates: list[Candidate]
    lexical: LexicalIndex
    embedding_model: str | None = None
    # Rows of unit vectors for candidates that have an embedding; -1 where they do not.
    matrix: np.ndarray | None = None
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    importance: np.ndarray = field(default_factory=lambda: np.zeros(0))
    timestamps: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def build(cls, candidates: list[Candidate], embedding_model: str | None) -> UserIndex:
        index = cls(candidates, LexicalIndex([c.content for c in candidates]), embedding_model)
        index.importance = np.asarray([c.importance for c in candidates], dtype=float)
        index.timestamps = np.asarray([_epoch(c.updated_at) for c in candidates], dtype=float)
        with_vectors = [c.embedding for c in candidates if c.embedding]
        if embedding_model and with_vectors:
            width = len(with_vectors[0])
            vectors = [v for v in with_vectors if len(v) == width]
            matrix = np.asarray(vectors, dtype=float)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            index.matrix = matrix / np.where(norms == 0, 1.0, norms)
            rows = np.full(len(candidates), -1, dtype=int)
            row = 0
            for position, candidate in enumerate(candidates):
                if candidate.embedding and len(candidate.embedding) == width:
                    rows[position] = row
                    row += 1
            index.rows = rows
        return index

    def similarities(self, query: str, query_vector: list[float] | None) -> np.ndarray:
        lexical = self.lexical.similarities(query)
        if self.matrix is None or query_vector is None:
            return lexical
        vector = np.asarray(query_vector, dtype=float)
        if vector.shape[0] != self.matrix.shape[1]:
            return lexical
        norm = float(np.linalg.norm(vector)) or 1.0
        cosine = np.clip(self.matrix @ (vector / norm), 0.0, 1.0)
        has = self.rows >= 0
        result = lexical.copy()
        result[has] = cosine[self.rows[has]]
        return result


def _epoch(when: datetime) -> float:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def rank(
    candidates: Sequence[Candidate],
    similarities: np.ndarray,
    *,
    now: datetime,
    half_life_days: float,
    min_score: float,
    top_k: int,
    token_cap: int,
    count: Callable[[str], int],
    importance: np.ndarray | None = None,
    timestamps: np.ndarray | None = None,
) -> list[Retrieved]:
    """The best memories by score (vectorized), then top_k and the token cap, best first."""
    if not len(candidates):
        return []
    if importance is None:
        importance = np.asarray([c.importance for c in candidates], dtype=float)
    if timestamps is None:
        timestamps = np.asarray([_epoch(c.updated_at) for c in candidates], dtype=float)
    ages = np.maximum(0.0, (_epoch(now) - timestamps) / 86400.0)
    scores = similarities * (importance / 10.0) * np.power(0.5, ages / half_life_days)
    eligible = np.flatnonzero((similarities > 0) & (scores >= min_score))
    if not eligible.size:
        return []
    # Enough of the best to fill top_k even when some do not fit the token cap.
    keep = min(eligible.size, max(top_k * 8, 64))
    best = eligible[np.argpartition(-scores[eligible], keep - 1)[:keep]]
    ordered = sorted(best.tolist(), key=lambda i: (-float(scores[i]), candidates[i].id))
    chosen: list[Retrieved] = []
    used = 0
    for i in ordered:
        if len(chosen) >= top_k:
            break
        candidate = candidates[i]
        tokens = count(f"- ({candidate.memory_type}) {candidate.content}")
        if used + tokens > token_cap:
            continue
        chosen.append(
            Retrieved(
                candidate.id,
                candidate.content,
                candidate.memory_type,
                candidate.importance,
                round(float(scores[i]), 6),
                round(float(similarities[i]), 6),
                candidate.updated_at,
            )
        )
        used += tokens
    return chosen


def _candidate(row: Any, embedding_model: str | None) -> Candidate:
    vector = None
    if embedding_model and row.embedding and row.embedding_model == embedding_model:
        vector = tuple(row.embedding)
    return Candidate(row.id, row.content, row.memory_type, row.importance, row.updated_at, vector)


async def user_index(
    state: AppState, session: AsyncSession, tenant_id: str, user: str
) -> UserIndex:
    runtime = state.memory
    model = state.settings.embedding_model
    signature = (*await memory_repository.memory_signature(session, tenant_id, user), model)
    key = (tenant_id, user)
    cached = runtime.cached_index(key, signature)
    if isinstance(cached, UserIndex):
        return cached
    rows = await memory_repository.memory_rows(session, tenant_id, user)
    index = UserIndex.build([_candidate(row, model) for row in rows], model)
    runtime.store_index(key, signature, index)
    return index


async def retrieve(
    state: AppState,
    session: AsyncSession,
    tenant_id: str,
    user: str,
    query: str,
    *,
    count: Callable[[str], int],
    notes: list[str],
    top_k: int | None = None,
    min_score: float | None = None,
) -> list[Retrieved]:
    settings = state.settings
    index = await user_index(state, session, tenant_id, user)
    if not index.candidates or not query.strip():
        return []
    query_vector: list[float] | None = None
    if settings.embedding_model and index.matrix is not None:
        try:
            query_vector = (await embed(state, settings.embedding_model, [query]))[0]
        except EmbeddingFailed as exc:
            notes.append(f"memory: embeddings failed, used BM25 ({exc})")
    return rank(
        index.candidates,
        index.similarities(query, query_vector),
        now=datetime.now(UTC),
        half_life_days=settings.memory_half_life_days,
        min_score=settings.memory_min_score if min_score is None else min_score,
        top_k=top_k or settings.memory_top_k,
        token_cap=settings.memory_token_cap,
        count=count,
        importance=index.importance,
        timestamps=index.timestamps,
    )
