"""Compaction's pure parts: which turns a window takes, and the bundle's format."""

from __future__ import annotations

from app.compaction.bundle import SummaryView, render_bundle
from app.compaction.repository import TurnSpan
from app.compaction.windows import select_window


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
