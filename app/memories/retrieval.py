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

A user's index (BM25 + a float32 matrix of unit vectors, memory_index.py) is cached per process
and brought up to date incrementally when the (count, latest update, embedder) signature of
their memories changes (index_refresh.py). Memories stored without a vector for the current
embedder are embedded then, and the vectors written back in the background
(memory_vectors.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.lazy_module import lazy_module
from app.core.settings import Settings
from app.embedders.embedder import EmbeddingFailed
from app.memories.index_refresh import IndexServices, ensure_lexical, user_index
from app.memories.lexical import LEXICAL_COVERAGE, LEXICAL_STRONG, LexicalIndex
from app.memories.memory_index import Candidate, UserIndex, epoch

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = [
    "LEXICAL_COVERAGE",
    "LEXICAL_STRONG",
    "RRF_K",
    "Candidate",
    "LexicalIndex",
    "RankPolicy",
    "Relevance",
    "Retrieved",
    "RetrievalQuery",
    "UserIndex",
    "fuse",
    "rank",
    "recency_decay",
    "relevance",
    "retrieve",
    "score",
]

logger = logging.getLogger(__name__)

# Reciprocal-rank fusion constant: small, so the top of either ranking counts (bench/README.md).
RRF_K = 5


def recency_decay(age_days: float, half_life_days: float) -> float:
    return float(0.5 ** (max(0.0, age_days) / half_life_days))


def score(similarity: float, importance: int, age_days: float, half_life_days: float) -> float:
    return similarity * (importance / 10.0) * recency_decay(age_days, half_life_days)


@dataclass(frozen=True, slots=True)
class Retrieved:
    id: str
    content: str
    memory_type: str
    importance: int
    score: float
    similarity: float
    updated_at: datetime | None = None  # for the age in the injected line


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


def relevance(
    index: UserIndex, query: str, query_vector: np.ndarray | None, min_similarity: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(relevance, similarity reported, eligible) for every memory of ``index``."""
    matrix = index.semantic_matrix()
    semantic = matrix is not None and query_vector is not None
    raw, strong = index.lexical_scores(query, strong=semantic)
    squashed = raw / (raw + 1.0)
    if matrix is None or query_vector is None:
        return squashed, squashed, squashed > 0
    cosine = matrix @ query_vector.astype(np.float32)
    eligible = (cosine >= min_similarity) | strong
    return fuse(cosine, raw, strong), cosine.astype(float), eligible


@dataclass(frozen=True, slots=True)
class Relevance:
    """Per candidate: ``similarities``, the relevance the score multiplies; ``eligible``
    (semantic mode) decides which may be chosen; ``reported``, the similarity to report (the
    cosine; default ``similarities``). ``importance`` and ``timestamps``: the index's arrays,
    read from the candidates when absent."""

    similarities: np.ndarray
    importance: np.ndarray | None = None
    timestamps: np.ndarray | None = None
    eligible: np.ndarray | None = None
    reported: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class RankPolicy:
    """How many memories, how old and how good: ``min_score`` applies without ``eligible``;
    ``count`` measures a memory's line against ``token_cap``."""

    now: datetime
    half_life_days: float
    min_score: float
    top_k: int
    token_cap: int
    count: Callable[[str], int]


def rank(candidates: Sequence[Candidate], scored: Relevance, policy: RankPolicy) -> list[Retrieved]:
    """The best memories by score (vectorized), then top_k and the token cap, best first.

    With ``scored.eligible`` (semantic mode) that mask decides and ``min_score`` is not used;
    without it, a memory needs a positive similarity and a score of at least ``min_score``."""
    if not len(candidates):
        return []
    similarities = scored.similarities
    importance, timestamps = scored.importance, scored.timestamps
    if importance is None:
        importance = np.asarray([c.importance for c in candidates], dtype=float)
    if timestamps is None:
        timestamps = np.asarray([epoch(c.updated_at) for c in candidates], dtype=float)
    ages = np.maximum(0.0, (epoch(policy.now) - timestamps) / 86400.0)
    scores = similarities * (importance / 10.0) * np.power(0.5, ages / policy.half_life_days)
    eligible = scored.eligible
    if eligible is None:
        eligible = (similarities > 0) & (scores >= policy.min_score)
    chosen_rows = np.flatnonzero(eligible)
    if not chosen_rows.size:
        return []
    reported = similarities if scored.reported is None else scored.reported
    return _best(candidates, chosen_rows, (scores, reported), policy)


def _best(
    candidates: Sequence[Candidate],
    rows: np.ndarray,
    values: tuple[np.ndarray, np.ndarray],
    policy: RankPolicy,
) -> list[Retrieved]:
    """The eligible ``rows`` best first by score, within ``top_k`` and the token cap.
    ``values``: (scores, similarities reported) of every candidate."""
    scores, reported = values
    top_k = policy.top_k
    # Enough of the best to fill top_k even when some do not fit the token cap.
    keep = min(rows.size, max(top_k * 8, 64))
    best = rows[np.argpartition(-scores[rows], keep - 1)[:keep]]
    ordered = sorted(best.tolist(), key=lambda i: (-float(scores[i]), candidates[i].id))
    chosen: list[Retrieved] = []
    used = 0
    for i in ordered:
        if len(chosen) >= top_k:
            break
        candidate = candidates[i]
        tokens = policy.count(f"- ({candidate.memory_type}) {candidate.content}")
        if used + tokens > policy.token_cap:
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


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """The memories of ``user`` to find for ``query``; ``count`` measures a line against the
    token cap; ``top_k``, ``min_score`` and ``min_similarity`` override the settings and the
    embedder's calibrated floor."""

    tenant_id: str
    user: str
    query: str
    count: Callable[[str], int]
    top_k: int | None = None
    min_score: float | None = None
    min_similarity: float | None = None


async def retrieve(
    services: IndexServices,
    settings: Settings,
    session: AsyncSession,
    wanted: RetrievalQuery,
    notes: list[str],
) -> list[Retrieved]:
    """The memories to inject for ``wanted.query``."""
    query = wanted.query
    index = await user_index(services, session, wanted.tenant_id, wanted.user, notes)
    if not index.candidates or not query.strip():
        return []
    embedder = services.embedder
    query_vector: np.ndarray | None = None
    if embedder is not None and index.semantic_matrix() is not None:
        try:
            query_vector = (await embedder.embed([query]))[0]
        except EmbeddingFailed as exc:
            notes.append(f"memory: embeddings failed, used BM25 ({exc})")
    threshold = embedder.min_similarity if embedder is not None else 0.0
    if wanted.min_similarity is not None:
        threshold = wanted.min_similarity
    await ensure_lexical(index, query)
    # From here on no await: the index is read in one consistent state.
    fused, similarity, eligible = relevance(index, query, query_vector, threshold)
    semantic = query_vector is not None
    policy = RankPolicy(
        now=datetime.now(UTC),
        half_life_days=settings.memory_half_life_days,
        min_score=settings.memory_min_score if wanted.min_score is None else wanted.min_score,
        top_k=wanted.top_k or settings.memory_top_k,
        token_cap=settings.memory_token_cap,
        count=wanted.count,
    )
    scores = Relevance(
        fused,
        importance=index.importance,
        timestamps=index.timestamps,
        eligible=eligible if semantic else None,
        reported=similarity,
    )
    return rank(index.candidates, scores, policy)
