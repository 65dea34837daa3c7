"""The history fit: a contiguous, tool-coherent tail, trimmed in chunks at absolute positions."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.context.budget import BudgetPolicy, input_budget
from app.context.fit import fit_history, history_cut
from app.conversations.messages import ConversationMessage


def _number(messages: list[ConversationMessage], start: int = 0) -> list[ConversationMessage]:
    """Give messages consecutive sequence numbers and absolute token positions."""
    position = start
    for sequence, message in enumerate(messages):
        message.sequence_number = sequence
        message.start_tokens = position
        position += message.token_count
    return messages


def msg(role: str, tokens: int, content: str = "", **extra: Any) -> ConversationMessage:
    return ConversationMessage(role=role, content=content or role, token_count=tokens, **extra)


def call(call_id: str, tokens: int = 20) -> ConversationMessage:
    return msg(
        "assistant",
        tokens,
        content="",
        tool_calls=[
            {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    )


def result(call_id: str, tokens: int = 20) -> ConversationMessage:
    return msg("tool", tokens, content=f"result {call_id}", tool_call_id=call_id)


def fit(history: list[ConversationMessage], available: int, chunk: int = 1) -> Any:
    start = history[0].start_tokens if history else 0
    end = history[-1].end_tokens if history else 0
    return fit_history(
        history,
        region_start=start,
        region_end=end,
        region_count=len(history),
        available=available,
        chunk_tokens=chunk,
    )


# --- the greedy-fit bug -----------------------------------------------------------------------


def test_huge_message_ends_the_tail_older_messages_are_not_used_to_fill_the_room() -> None:
    m1, m2, huge, m4 = _number(
        [msg("user", 10, "m1"), msg("assistant", 10, "m2"), msg("user", 500), msg("user", 10)]
    )
    result_ = fit([m1, m2, huge, m4], available=100)
    assert [m.content for m in result_.kept] == [m4.content]
    assert result_.excluded_count == 3
    assert result_.tokens == 10


def test_huge_message_with_chunking_still_keeps_only_what_follows_it() -> None:
    history = _number(
        [msg("user", 10, "m1"), msg("assistant", 10, "m2"), msg("user", 500), msg("user", 10)]
    )
    for chunk in (1, 7, 16, 1024):
        kept = fit(history, available=100, chunk=chunk).kept
        assert [m.sequence_number for m in kept] == [3], chunk


def test_everything_fits_keeps_everything() -> None:
    history = _number([msg("user", 10), msg("assistant", 10), msg("user", 10)])
    result_ = fit(history, available=30)
    assert result_.kept == history
    assert result_.excluded_count == 0
    assert result_.tokens == 30


def test_no_room_keeps_nothing() -> None:
    history = _number([msg("user", 10), msg("assistant", 10)])
    for available in (0, -5, 9):
        result_ = fit(history, available=available)
        assert result_.kept == []
        assert result_.excluded_count == 2


# --- tool groups --------------------------------------------------------------------------------


def test_tool_call_and_results_are_dropped_together_when_the_cut_splits_them() -> None:
    history = _number(
        [
            msg("user", 10, "q"),
            call("c1", 20),
            result("c1", 20),
            msg("assistant", 10, "a"),
            msg("user", 10, "q2"),
            msg("assistant", 10, "a2"),
        ]
    )
    # Room for the last four messages: the cut lands between the call and its result.
    kept = fit(history, available=50).kept
    assert [m.sequence_number for m in kept] == [3, 4, 5]
    assert all(m.role != "tool" for m in kept)


def test_tool_group_with_several_results_is_kept_whole() -> None:
    assistant = msg(
        "assistant",
        30,
        content="",
        tool_calls=[
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    )
    history = _number(
        [msg("user", 10), assistant, result("a", 10), result("b", 10), msg("assistant", 10)]
    )
    kept = fit(history, available=60).kept
    assert [m.sequence_number for m in kept] == [1, 2, 3, 4]
    # One result less room: the group goes as a whole, never half of it.
    kept = fit(history, available=59).kept
    assert [m.sequence_number for m in kept] == [4]


def test_call_whose_result_is_missing_is_not_sent() -> None:
    history = _number([msg("user", 10), call("lost", 10), msg("user", 10), msg("assistant", 10)])
    kept = fit(history, available=1000).kept
    assert [m.sequence_number for m in kept] == [0, 2, 3]


# --- chunked trimming ---------------------------------------------------------------------------


def test_cut_is_quantized_to_chunks_from_the_region_start() -> None:
    assert history_cut(100, 150, available=100, chunk_tokens=10) == 100
    # 1000 - 400 = 600 to drop, in chunks of 100 (at most available // 4).
    assert history_cut(0, 1000, available=400, chunk_tokens=100) == 600
    assert history_cut(0, 1001, available=400, chunk_tokens=100) == 700
    assert history_cut(50, 1051, available=400, chunk_tokens=100) == 750
    # A chunk bigger than a quarter of the room is shrunk so as not to throw away too much.
    assert history_cut(0, 1001, available=400, chunk_tokens=10_000) == 700
    assert history_cut(0, 1000, available=0, chunk_tokens=10) == 1000


def test_first_kept_message_stays_the_same_across_appended_turns() -> None:
    """Prompt caches hit only if the kept prefix is byte-identical from turn to turn."""
    chunk, available = 200, 800
    history: list[ConversationMessage] = []
    firsts: list[int] = []
    for turn in range(40):
        history.extend([msg("user", 30, f"q{turn}"), msg("assistant", 20, f"a{turn}")])
        _number(history)
        kept = fit(history, available=available, chunk=chunk).kept
        assert sum(m.token_count for m in kept) <= available
        assert kept == history[len(history) - len(kept) :]  # a contiguous tail
        firsts.append(kept[0].sequence_number)
    trimmed = [first for first in firsts if first > 0]
    assert trimmed, "the history outgrew the room; something must have been trimmed"
    # 50 tokens a turn, 200-token chunks: the first kept message moves once every 4 turns.
    changes = sum(1 for a, b in zip(firsts, firsts[1:], strict=False) if a != b)
    assert changes <= len(firsts) // 4 + 1
    runs = [firsts.count(value) for value in dict.fromkeys(trimmed)]
    assert max(runs) >= 4


def test_positions_are_absolute_not_relative_to_what_was_loaded() -> None:
    """Only the tail after the cut is loaded from the database; the result must not change."""
    history = _number([msg("user", 25), msg("assistant", 25)] * 20)
    full = fit_history(
        history,
        region_start=0,
        region_end=history[-1].end_tokens,
        region_count=len(history),
        available=300,
        chunk_tokens=64,
    )
    cut = history_cut(0, history[-1].end_tokens, 300, 64)
    loaded = [m for m in history if m.start_tokens >= cut]
    partial = fit_history(
        loaded,
        region_start=0,
        region_end=history[-1].end_tokens,
        region_count=len(history),
        available=300,
        chunk_tokens=64,
    )
    assert partial.kept == full.kept
    assert partial.excluded_count == full.excluded_count == len(history) - len(full.kept)


# --- properties ---------------------------------------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[ConversationMessage]:
    """Coherent histories: user / assistant turns, some with tool calls and their results."""
    messages: list[ConversationMessage] = []
    for turn in range(draw(st.integers(0, 15))):
        messages.append(msg("user", draw(st.integers(1, 400)), f"q{turn}"))
        for group in range(draw(st.integers(0, 2))):
            ids = [f"t{turn}-{group}-{i}" for i in range(draw(st.integers(1, 3)))]
            messages.append(
                msg(
                    "assistant",
                    draw(st.integers(1, 100)),
                    content="",
                    tool_calls=[
                        {"id": i, "type": "function", "function": {"name": "f", "arguments": ""}}
                        for i in ids
                    ],
                )
            )
            messages.extend(result(i, draw(st.integers(1, 300))) for i in ids)
        messages.append(msg("assistant", draw(st.integers(1, 400)), f"a{turn}"))
    return _number(messages, start=draw(st.integers(0, 500)))


@settings(max_examples=300, deadline=None)
@given(
    history=conversations(),
    available=st.integers(-10, 5000),
    chunk=st.integers(1, 2048),
)
def test_fit_properties(history: list[ConversationMessage], available: int, chunk: int) -> None:
    result_ = fit(history, available=available, chunk=chunk)
    kept = result_.kept
    # Never over the room.
    assert result_.tokens == sum(m.token_count for m in kept) <= max(available, 0)
    # A contiguous tail of the history.
    assert kept == history[len(history) - len(kept) :]
    assert result_.excluded_count == len(history) - len(kept)
    # Tool coherence: every kept call has all its results kept, every kept result its call.
    kept_calls = {c["id"] for m in kept for c in (m.tool_calls or [])}
    kept_results = {m.tool_call_id for m in kept if m.role == "tool"}
    assert kept_calls == kept_results
    # Everything fits -> everything is kept.
    if history and history[-1].end_tokens - history[0].start_tokens <= available:
        assert kept == history


@settings(max_examples=200, deadline=None)
@given(
    region_start=st.integers(0, 10_000),
    total=st.integers(0, 50_000),
    available=st.integers(1, 20_000),
    chunk=st.integers(1, 4096),
)
def test_cut_leaves_at_most_the_room(
    region_start: int, total: int, available: int, chunk: int
) -> None:
    cut = history_cut(region_start, region_start + total, available, chunk)
    assert region_start <= cut
    assert region_start + total - cut <= available
    # Chunking never throws away more than one (effective) chunk beyond what is needed.
    if total > available:
        need = total - available
        assert cut - region_start < need + max(1, min(chunk, available // 4))


# --- the budget ---------------------------------------------------------------------------------


def test_budget_explicit_wins() -> None:
    policy = BudgetPolicy()
    budget = input_budget(
        explicit=50, context_window=128_000, output_tokens_requested=4000, policy=policy
    )
    assert budget == 50


def test_budget_is_window_minus_reserve_minus_margin() -> None:
    policy = BudgetPolicy(
        default_context_window=8192, output_reserve_tokens=1024, safety_margin_ratio=0.05
    )
    assert (
        input_budget(
            explicit=None, context_window=128_000, output_tokens_requested=None, policy=policy
        )
        == 128_000 - 1024 - 6400
    )
    # The request's max_tokens replaces the default reserve.
    assert (
        input_budget(
            explicit=None, context_window=128_000, output_tokens_requested=4000, policy=policy
        )
        == 128_000 - 4000 - 6400
    )


def test_budget_unknown_model_uses_the_documented_default_window() -> None:
    policy = BudgetPolicy(default_context_window=8192)
    assert input_budget(
        explicit=None, context_window=None, output_tokens_requested=None, policy=policy
    ) == 8192 - 1024 - int(8192 * 0.05)


def test_budget_reserve_never_eats_more_than_half_the_window() -> None:
    policy = BudgetPolicy(safety_margin_ratio=0.0)
    budget = input_budget(
        explicit=None, context_window=4000, output_tokens_requested=100_000, policy=policy
    )
    assert budget == 2000
