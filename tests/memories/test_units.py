"""Unit tests: window selection, bundle format, scoring, ranking, injection, extraction cadence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from app.memories.bundle import SummaryView, render_bundle
from app.memories.compaction import select_window
from app.memories.extraction import extraction_due
from app.memories.injection import inject, insert_bundle, render_context
from app.memories.repository import TurnSpan
from app.memories.retrieval import Candidate, LexicalIndex, Retrieved, rank, recency_decay, score
from app.memories.service import text_similarity


def words(text: str) -> int:
    return len(text.split())


def spans(*sizes: int) -> list[TurnSpan]:
    result, position, sequence = [], 10, 1
    for turn, size in enumerate(sizes, start=1):
        result.append(TurnSpan(turn, sequence, position, size, 2))
        position += size
        sequence += 2
    return result


def test_window_takes_whole_turns_and_leaves_the_raw_tail() -> None:
    window = select_window(
        spans(50, 50, 50, 50, 50, 50, 50),
        tail_turns=4,
        current_stored=False,
        max_tokens=10_000,
        end_tokens=360,
        end_sequence=15,
    )
    assert window is not None
    assert (window.first_turn, window.last_turn, window.turns) == (1, 3, 3)
    # The boundary is where turn 4 starts: the 4 newest turns stay raw.
    assert (window.start_tokens, window.end_tokens, window.end_sequence) == (10, 160, 7)
    assert window.tokens == 150


def test_window_excludes_a_stored_current_turn_and_caps_the_summarizer_input() -> None:
    turns = spans(100, 100, 100, 100, 100, 100, 100)
    window = select_window(
        turns, tail_turns=4, current_stored=True, max_tokens=150, end_tokens=0, end_sequence=0
    )
    assert window is not None
    assert (window.first_turn, window.last_turn) == (1, 1)  # 150 tokens: one whole turn
    big = select_window(
        spans(500, 10, 10),
        tail_turns=1,
        current_stored=False,
        max_tokens=100,
        end_tokens=0,
        end_sequence=0,
    )
    assert big is not None
    assert big.last_turn == 1


def test_window_is_none_when_everything_is_tail() -> None:
    assert (
        select_window(
            spans(10, 10, 10, 10),
            tail_turns=4,
            current_stored=False,
            max_tokens=100,
            end_tokens=0,
            end_sequence=0,
        )
        is None
    )


def test_bundle_format_is_deterministic() -> None:
    summaries = [
        SummaryView(
            "sum_a",
            1,
            4,
            "The user   asked for a plan.",
            [{"fact": "Deadline is Friday", "type": "decision", "importance": 8}],
        ),
        SummaryView(
            "sum_b",
            5,
            9,
            "They agreed on Postgres.",
            [
                {"fact": "Uses PostgreSQL", "type": "fact", "importance": 6},
                {"fact": "deadline is friday", "type": "decision", "importance": 9},
            ],
        ),
    ]
    bundle = render_bundle(summaries, cap_tokens=1000, count=words)
    assert bundle.text == (
        "[MEMORY:EPISODIC]\n"
        "(turns 1-4) The user asked for a plan.\n"
        "(turns 5-9) They agreed on Postgres.\n"
        "[MEMORY:SEMANTIC]\n"
        "- (decision, importance 9) deadline is friday\n"
        "- (fact, importance 6) Uses PostgreSQL"
    )
    assert bundle.summaries_included == ["sum_a", "sum_b"]
    assert render_bundle(summaries, cap_tokens=1000, count=words).text == bundle.text


def test_bundle_keeps_the_newest_episodes_within_its_cap() -> None:
    summaries = [SummaryView(f"s{i}", i, i, "word " * 20) for i in range(1, 6)]
    bundle = render_bundle(summaries, cap_tokens=60, count=words)
    assert bundle.summaries_included == ["s5"]
    assert bundle.summaries_omitted == 4
    assert words(bundle.text) <= 60


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
        similarities,
        now=now,
        half_life_days=90,
        min_score=0.1,
        top_k=8,
        token_cap=1000,
        count=words,
    )
    assert [r.id for r in found] == ["m1", "m4", "m2"]
    assert found[0].score == pytest.approx(0.9)
    assert found[2].score == pytest.approx(0.9 * 0.5 * 0.5)
    capped = rank(
        candidates,
        similarities,
        now=now,
        half_life_days=90,
        min_score=0.3,
        top_k=1,
        token_cap=1000,
        count=words,
    )
    assert [r.id for r in capped] == ["m1"]
    small = rank(
        candidates,
        similarities,
        now=now,
        half_life_days=90,
        min_score=0.0,
        top_k=8,
        token_cap=8,
        count=words,
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


def test_injection_modes() -> None:
    now = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)
    memories = [Retrieved("m1", "Likes tea", "preference", 7, 0.5, 0.7, now - timedelta(days=3))]
    block = render_context(memories, now)
    assert block == (
        "[CONTEXT: 2026-03-04 05:06 UTC]\n"
        "Relevant memories:\n- [preference, importance 7, 3 days ago] Likes tea"
    )
    messages = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "new"},
    ]
    prefixed = inject(messages, block, "user_prefix")
    assert prefixed[0] == messages[0]
    assert prefixed[3]["content"] == f"{block}\n\nnew"
    assert messages[3]["content"] == "new"  # the input is not modified
    appended = inject(messages, block, "system_append")
    assert appended[0]["content"] == f"Be kind.\n\n{block}"
    separate = inject(messages, block, "context_message")
    assert separate[3] == {"role": "system", "content": block}
    assert separate[4]["content"] == "new"
    parts = inject(
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "B", "user_prefix"
    )
    assert parts[0]["content"][0] == {"type": "text", "text": "B"}
    bundled = insert_bundle(messages, "[MEMORY:EPISODIC]")
    assert [m["role"] for m in bundled[:3]] == ["system", "system", "user"]


def test_extraction_cadence() -> None:
    assert extraction_due("every_turn", 5, 3) == 1
    assert extraction_due("periodic", 5, 4) == 0
    assert extraction_due("periodic", 5, 10) == 5
    assert extraction_due("off", 5, 10) == 0


def test_text_similarity() -> None:
    assert text_similarity("User likes tea", "user likes TEA") == 1.0
    assert text_similarity("User likes tea", "User lives in Paris") < 0.5


def test_compaction_ratio_per_request_then_per_model_then_default() -> None:
    from types import SimpleNamespace

    from app.core.settings import Settings
    from app.memories.background import compaction_ratio

    settings = Settings(compaction_ratio_by_model={"big-model": 0.6}, _env_file=None)
    state: Any = SimpleNamespace(settings=settings)
    assert compaction_ratio(state, 0.5, "big-model") == 0.5
    assert compaction_ratio(state, None, "big-model") == 0.6
    assert compaction_ratio(state, None, "other") == 0.8
