"""Unit tests of long-term memory: scoring, ranking, BM25, extraction cadence, restatements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.memories.extraction import extraction_due
from app.memories.retrieval import (
    Candidate,
    LexicalIndex,
    RankPolicy,
    Relevance,
    rank,
    recency_decay,
    score,
)
from app.memories.service import text_similarity


def words(text: str) -> int:
    return len(text.split())


def test_score_multiplies_similarity_importance_and_recency() -> None:
    assert recency_decay(0, 30) == 1.0
    assert recency_decay(30, 30) == pytest.approx(0.5)
    assert score(0.8, 5, 0, 30) == pytest.approx(0.4)
    assert score(0.8, 10, 60, 30) == pytest.approx(0.2)


def test_rank_applies_threshold_top_k_and_token_cap() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    candidates = [
        Candidate("m1", "likes tea", "preference", 10, now),
        Candidate("m2", "likes coffee", "preference", 5, now - timedelta(days=90)),
        Candidate("m3", "irrelevant", "note", 10, now),
        Candidate("m4", "a long memory " * 10, "fact", 9, now),
    ]
    similarities = np.array([0.9, 0.9, 0.0, 0.8])
    found = rank(
        candidates,
        Relevance(similarities),
        RankPolicy(now=now, half_life_days=90, min_score=0.1, top_k=8, token_cap=1000, count=words),
    )
    assert [r.id for r in found] == ["m1", "m4", "m2"]
    assert found[0].score == pytest.approx(0.9)
    assert found[2].score == pytest.approx(0.9 * 0.5 * 0.5)
    capped = rank(
        candidates,
        Relevance(similarities),
        RankPolicy(now=now, half_life_days=90, min_score=0.3, top_k=1, token_cap=1000, count=words),
    )
    assert [r.id for r in capped] == ["m1"]
    small = rank(
        candidates,
        Relevance(similarities),
        RankPolicy(now=now, half_life_days=90, min_score=0.0, top_k=8, token_cap=8, count=words),
    )
    assert [r.id for r in small] == ["m1", "m2"]  # m4 does not fit 8 tokens


def test_bm25_similarity_prefers_matching_memories() -> None:
    index = LexicalIndex(["User lives in Paris", "User likes Python", "Favourite color is blue"])
    values = index.similarities("Which city? Paris or Lyon")
    assert values[0] > 0
    assert values[1] == 0
    assert values[2] == 0
    assert np.all(values < 1)
    assert np.all(index.similarities("zzz unknown") == 0)
    assert LexicalIndex([]).similarities("x").shape == (0,)


def test_extraction_cadence() -> None:
    assert extraction_due("every_turn", 5, 3) == 1
    assert extraction_due("periodic", 5, 4) == 0
    assert extraction_due("periodic", 5, 10) == 5
    assert extraction_due("off", 5, 10) == 0


def test_text_similarity() -> None:
    assert text_similarity("User likes tea", "user likes TEA") == 1.0
    assert text_similarity("User likes tea", "User lives in Paris") < 0.5
