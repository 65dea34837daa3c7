"""Retrieve a user's long-term memories for a query.

With an embedder (the default: the embedded model, see embedder.py):

    eligible   = cosine >= min_similarity (calibrated per embedder)  or  a strong BM25 match
    relevance  = reciprocal-rank fusion of the cosine ranking and the BM25 ranking, in (0, 1]
    score      = relevance x importance/10 x recency decay (half-life)

The threshold applies to the similarities, never to the fused score, so a weak match is not
injected however important or recent it is; BM25 in the fusion keeps exact names, ids and
numbers on top. Without an embedder (``CONTEXTGATE_EMBEDDER=bm25``): similarity is BM25
(bm25s) squashed into [0, 1) as s / (s + 1), and ``memory_min_score`` applies to the score.
Eligible memories are taken best first up to ``top_k`` and a token cap.

A user's index (BM25 + a float32 matrix of unit vectors) is cached per process and rebuilt when
the (count, latest update, embedder) signature of their memories changes. Memories stored
without a vector for the current embedder are embedded when the index is built, and the vectors
are written back in the background (vectors.py).
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
from app.memories.embedder import Embedder, EmbeddingFailed, unit_rows
from app.memories.repository import memory_repository
from app.memories.vectors import save_memory_vectors

__all__ = [
    "LEXICAL_COVERAGE",
    "LEXICAL_STRONG",
    "RRF_K",
    "Candidate",
    "LexicalIndex",
    "Retrieved",
    "UserIndex",
    "fuse",
    "rank",
    "recency_decay",
    "retrieve",
    "score",
]

logger = logging.getLogger(__name__)

# Reciprocal-rank fusion constant: small, so the top of either ranking counts (bench/README.md).
RRF_K = 5
# Raw BM25 from which a lexical match counts: it joins the fusion and is eligible without the
# cosine (a rare exact name, id or number the embedder does not see). Weaker BM25 matches are
# incidental shared words and only add noise to paraphrased questions (bench/README.md).
LEXICAL_STRONG = 2.0
LEXICAL_COVERAGE = 0.6
_COVERAGE_CHECKED = 64
# At most this many missing vectors are computed per request (the rest wait their turn).
_LAZY_LIMIT = 4096


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
        self._terms: list[frozenset[str]] = []
        if contents:
            tokens = _tokenize(list(contents))
            self._terms = [frozenset(t) for t in tokens]
            self._bm25 = bm25s.BM25()
            self._bm25.index(tokens, show_progress=False)

    def strong(self, query: str, raw: np.ndarray) -> np.ndarray:
        """Matches strong enough to count on their own: BM25 >= ``LEXICAL_STRONG``, or most of
        the query's terms (``LEXICAL_COVERAGE``) present, which small collections need (their
        IDF is low, so even an exact id scores little)."""
        strong = raw >= LEXICAL_STRONG
        terms = set(_tokenize([query])[0])
        if not terms:
            return strong
        weaker = np.flatnonzero((raw > 0) & ~strong)
        if weaker.size > _COVERAGE_CHECKED:  # only the best BM25 matches can cover the query
            weaker = weaker[
                np.argpartition(-raw[weaker], _COVERAGE_CHECKED - 1)[:_COVERAGE_CHECKED]
            ]
        for i in weaker:
            strong[i] = len(terms & self._terms[i]) / len(terms) >= LEXICAL_COVERAGE
        return strong

    def raw(self, query: str) -> np.ndarray:
        if self._bm25 is None:
            return np.zeros(self.size)
        vocab = self._bm25.vocab_dict
        terms = [t for t in _tokenize([query])[0] if t in vocab]
        if not terms:
            return np.zeros(self.size)
        return np.asarray(self._bm25.get_scores(terms), dtype=float)

    def similarities(self, query: str) -> np.ndarray:
        raw = self.raw(query)
        return np.asarray(raw / (raw + 1.0))


def _ranks(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """1-based rank of each value (descending) among the present ones; 0 where absent."""
    ranks = np.zeros(values.shape[0], dtype=float)
    where = np.flatnonzero(present)
    if where.size:
        order = where[np.argsort(-values[where], kind="stable")]
        ranks[order] = np.arange(1, order.size + 1)
    return ranks


def fuse(
    cosine: np.ndarray, lexical: np.ndarray, strong: np.ndarray | None = None, k: int = RRF_K
) -> np.ndarray:
    """Reciprocal-rank fusion of the cosine ranking and the raw BM25 ranking, scaled into
    (0, 1] (1: first in both). Only strong lexical matches are ranked (``LexicalIndex.strong``;
    default: BM25 >= ``LEXICAL_STRONG``)."""
    if strong is None:
        strong = lexical >= LEXICAL_STRONG
    semantic_rank = _ranks(cosine, np.ones(cosine.shape[0], dtype=bool))
    lexical_rank = _ranks(lexical, strong)
    fused = 1.0 / (k + semantic_rank)
    has_lexical = lexical_rank > 0
    fused[has_lexical] += 1.0 / (k + lexical_rank[has_lexical])
    return np.asarray(fused / (2.0 / (k + 1)))


@dataclass(slots=True)
class UserIndex:
    candidates: list[Candidate]
    lexical: LexicalIndex
    embedder_name: str | None = None
    # Unit vectors, one row per candidate (zeros where none could be computed).
    matrix: np.ndarray | None = None
    importance: np.ndarray = field(default_factory=lambda: np.zeros(0))
    timestamps: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def build(
        cls,
        candidates: list[Candidate],
        embedder_name: str | None = None,
        matrix: np.ndarray | None = None,
    ) -> UserIndex:
        index = cls(candidates, LexicalIndex([c.content for c in candidates]), embedder_name)
        index.importance = np.asarray([c.importance for c in candidates], dtype=float)
        index.timestamps = np.asarray([_epoch(c.updated_at) for c in candidates], dtype=float)
        index.matrix = matrix
        return index

    def relevance(
        self, query: str, query_vector: np.ndarray | None, min_similarity: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(relevance, similarity reported, eligible) for every candidate."""
        raw = self.lexical.raw(query)
        squashed = raw / (raw + 1.0)
        if self.matrix is None or query_vector is None:
            return squashed, squashed, squashed > 0
        cosine = self.matrix @ query_vector.astype(np.float32)
        strong = self.lexical.strong(query, raw)
        eligible = (cosine >= min_similarity) | strong
        return fuse(cosine, raw, strong), cosine.astype(float), eligible


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
    eligible: np.ndarray | None = None,
    reported: np.ndarray | None = None,
) -> list[Retrieved]:
    """The best memories by score (vectorized), then top_k and the token cap, best first.

    ``similarities`` is the relevance the score multiplies. With ``eligible`` (semantic mode)
    that mask decides and ``min_score`` is not used; without it, a memory needs a positive
    similarity and a score of at least ``min_score``. ``reported``: the similarity to report
    (the cosine), defaults to ``similarities``."""
    if not len(candidates):
        return []
    if importance is None:
        importance = np.asarray([c.importance for c in candidates], dtype=float)
    if timestamps is None:
        timestamps = np.asarray([_epoch(c.updated_at) for c in candidates], dtype=float)
    if reported is None:
        reported = similarities
    ages = np.maximum(0.0, (_epoch(now) - timestamps) / 86400.0)
    scores = similarities * (importance / 10.0) * np.power(0.5, ages / half_life_days)
    if eligible is None:
        eligible = (similarities > 0) & (scores >= min_score)
    chosen_rows = np.flatnonzero(eligible)
    if not chosen_rows.size:
        return []
    # Enough of the best to fill top_k even when some do not fit the token cap.
    keep = min(chosen_rows.size, max(top_k * 8, 64))
    best = chosen_rows[np.argpartition(-scores[chosen_rows], keep - 1)[:keep]]
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
                round(float(reported[i]), 6),
                candidate.updated_at,
            )
        )
        used += tokens
    return chosen


def _candidate(row: Any, embedder_name: str | None) -> Candidate:
    vector = None
    if embedder_name and row.embedding and row.embedding_model == embedder_name:
        vector = tuple(row.embedding)
    return Candidate(row.id, row.content, row.memory_type, row.importance, row.updated_at, vector)


async def _matrix(
    state: AppState,
    embedder: Embedder,
    tenant_id: str,
    candidates: list[Candidate],
    notes: list[str],
) -> np.ndarray | None:
    """Unit vectors of every candidate; missing ones embedded now and saved in the background."""
    missing = [i for i, c in enumerate(candidates) if c.embedding is None][:_LAZY_LIMIT]
    computed: np.ndarray | None = None
    if missing:
        try:
            computed = await embedder.embed([candidates[i].content for i in missing])
        except EmbeddingFailed as exc:
            notes.append(f"memory: embeddings failed, used BM25 ({exc})")
            if len(missing) == len(candidates):
                return None
    width = computed.shape[1] if computed is not None and computed.size else None
    if width is None:
        width = next(len(c.embedding) for c in candidates if c.embedding is not None)
    matrix = np.zeros((len(candidates), width), dtype=np.float32)
    stored = [i for i, c in enumerate(candidates) if c.embedding is not None]
    if stored:
        rows = [candidates[i].embedding for i in stored]
        if all(row is not None and len(row) == width for row in rows):
            matrix[stored] = unit_rows(rows)
    if computed is not None and computed.shape[1] == width:
        matrix[missing] = computed
        save_memory_vectors(
            state,
            tenant_id,
            embedder.name,
            [(candidates[i].id, computed[n]) for n, i in enumerate(missing)],
        )
    return matrix


async def user_index(
    state: AppState,
    session: AsyncSession,
    tenant_id: str,
    user: str,
    notes: list[str] | None = None,
) -> UserIndex:
    runtime = state.memory
    embedder = state.embedder
    name = embedder.name if embedder is not None else None
    signature = (*await memory_repository.memory_signature(session, tenant_id, user), name)
    key = (tenant_id, user)
    cached = runtime.cached_index(key, signature)
    if isinstance(cached, UserIndex):
        return cached
    rows = await memory_repository.memory_rows(session, tenant_id, user)
    candidates = [_candidate(row, name) for row in rows]
    matrix = None
    if embedder is not None and candidates:
        failures: list[str] = []
        matrix = await _matrix(state, embedder, tenant_id, candidates, failures)
        if notes is not None:
            notes.extend(failures)
        if failures:  # not cached: the next request tries the embedder again
            return UserIndex.build(candidates, name if matrix is not None else None, matrix)
    index = UserIndex.build(candidates, name if matrix is not None else None, matrix)
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
    min_similarity: float | None = None,
) -> list[Retrieved]:
    """The memories to inject for ``query``; ``min_similarity`` overrides the embedder's."""
    settings = state.settings
    index = await user_index(state, session, tenant_id, user, notes)
    if not index.candidates or not query.strip():
        return []
    embedder = state.embedder
    query_vector: np.ndarray | None = None
    if embedder is not None and index.matrix is not None:
        try:
            query_vector = (await embedder.embed([query]))[0]
        except EmbeddingFailed as exc:
            notes.append(f"memory: embeddings failed, used BM25 ({exc})")
    threshold = embedder.min_similarity if embedder is not None else 0.0
    if min_similarity is not None:
        threshold = min_similarity
    relevance, similarity, eligible = index.relevance(query, query_vector, threshold)
    semantic = query_vector is not None
    return rank(
        index.candidates,
        relevance,
        now=datetime.now(UTC),
        half_life_days=settings.memory_half_life_days,
        min_score=settings.memory_min_score if min_score is None else min_score,
        top_k=top_k or settings.memory_top_k,
        token_cap=settings.memory_token_cap,
        count=count,
        importance=index.importance,
        timestamps=index.timestamps,
        eligible=eligible if semantic else None,
        reported=similarity,
    )
