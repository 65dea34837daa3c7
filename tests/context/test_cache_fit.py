"""The cache-aware fit on message sequences: a growing agent loop, call after call."""

from __future__ import annotations

from typing import Any

from app.context.cache_fit import CacheFit, CacheInput, cache_fit
from app.context.cache_policy import CachePolicy
from app.conversations.cache_state import CacheState
from app.conversations.messages import ConversationMessage

SYSTEM = 100  # tokens of the system prompt + reply primer: the fixed part besides the turn


def count(message: dict[str, Any]) -> int:
    return 4 + len(str(message.get("content") or "")) // 4


class Loop:
    """An agent loop's stored history: user asks, assistant calls a tool, result, answer."""

    def __init__(self) -> None:
        self.messages: list[ConversationMessage] = []
        self.position = 0

    def add(self, role: str, tokens: int, **fields: Any) -> ConversationMessage:
        message = ConversationMessage(
            role=role,
            content=fields.pop("content", "x" * (4 * max(0, tokens - 4))),
            sequence_number=len(self.messages),
            start_tokens=self.position,
            token_count=tokens,
            **fields,
        )
        self.messages.append(message)
        self.position += tokens
        return message

    def step(self, n: int, result_tokens: int, tool: str = "read_file") -> None:
        self.add("user", 30)
        function = {"name": tool, "arguments": "{}"}
        call = {"id": f"call_{n}", "type": "function", "function": function}
        self.add("assistant", 20, content=None, tool_calls=[call])
        self.add("tool", result_tokens, tool_call_id=f"call_{n}")
        self.add("assistant", 40)

    def fit(self, state: CacheState, policy: CachePolicy, budget: int) -> CacheFit:
        """The fit for a new user message (the current turn) after everything stored."""
        current = 30
        return cache_fit(
            self.messages,
            CacheInput(
                policy, state, region_first=0, current_first=len(self.messages), count=count
            ),
            budget=budget,
            fixed=SYSTEM + current,
            newer_tool_results=0,
        )


def _rendered(fit: CacheFit) -> list[tuple[int, Any]]:
    return [(m.sequence_number, m.content) for m in fit.kept]


def _pairs_intact(fit: CacheFit) -> bool:
    calls = {str(c["id"]) for m in fit.kept for c in m.tool_calls or []}
    results = {m.tool_call_id for m in fit.kept if m.role == "tool"}
    return calls == results


def run_loop(
    policy: CachePolicy, budget: int, steps: int, sizes: list[int], tool: str = "read_file"
) -> list[CacheFit]:
    loop, state, fits = Loop(), CacheState(), []
    for n in range(steps):
        fit = loop.fit(state, policy, budget)
        fits.append(fit)
        state = fit.state
        loop.step(n, sizes[n % len(sizes)], tool=tool)
    return fits


def test_prefix_is_byte_stable_until_a_rebase_and_every_prompt_fits() -> None:
    policy = CachePolicy(low_water_ratio=0.4, keep_tool_results=2, clear_at_least_tokens=1000)
    budget = 10_000
    fits = run_loop(policy, budget, 40, [800, 1500, 2500, 1200])
    rebases = [i for i, f in enumerate(fits) if f.rebased]
    assert rebases, "the loop outgrows the budget: at least one rebase"
    assert len(rebases) <= len(fits) // 4, "cuts are deep: few rebases"
    for previous, fit in zip(fits, fits[1:], strict=False):
        assert SYSTEM + 30 + fit.tokens <= budget
        assert _pairs_intact(fit)
        if not fit.rebased:
            # The previous prompt's history is this one's prefix, message for message.
            assert _rendered(fit)[: len(previous.kept)] == _rendered(previous)
        assert fit.state.cut_sequence >= previous.state.cut_sequence
        assert fit.state.cleared_sequence >= previous.state.cleared_sequence


def test_a_rebase_clears_old_results_in_one_batch_and_keeps_the_newest_raw() -> None:
    policy = CachePolicy(low_water_ratio=0.5, keep_tool_results=2, clear_at_least_tokens=1000)
    fits = run_loop(policy, 8_000, 12, [1500])
    fit = next(f for f in fits if f.rebased)
    tools = [m for m in fit.kept if m.role == "tool"]
    raw = [m for m in tools if "cleared" not in str(m.content)]
    assert [m.tool_call_id for m in raw] == [m.tool_call_id for m in tools[-2:]]
    cleared = [m for m in tools if "cleared" in str(m.content)]
    assert cleared
    assert fit.cleared_in_prompt == len(cleared)
    placeholder = str(cleared[0].content)
    assert "read_file" in placeholder
    assert cleared[0].tool_call_id in placeholder
    assert "1500 tokens" in placeholder
    assert "stored" in placeholder
    assert {c.tool_call_id for c in fit.cleared_now} == {m.tool_call_id for m in cleared}
    assert sum(c.tokens - 0 for c in fit.cleared_now) >= policy.clear_at_least_tokens
    assert fit.tokens <= 0.5 * 8_000 - SYSTEM - 30
    assert _pairs_intact(fit)


def test_a_deep_cut_goes_down_to_the_low_water_mark_at_a_user_message() -> None:
    # Nothing to clear (no tool results big enough): the rebase must cut messages.
    policy = CachePolicy(low_water_ratio=0.3, keep_tool_results=0, clear_at_least_tokens=0)
    loop, state = Loop(), CacheState()
    for _ in range(60):
        loop.add("user", 100)
        loop.add("assistant", 150)
    fit = loop.fit(state, policy, 5_000)
    assert fit.rebased
    assert fit.dropped > 0
    assert fit.kept[0].role == "user"
    assert fit.tokens <= 0.3 * 5_000 - SYSTEM - 30
    assert fit.tokens > 0.3 * 5_000 - SYSTEM - 30 - 250  # not deeper than needed for the mark
    assert fit.state.cut_sequence == fit.kept[0].sequence_number
    assert fit.state.cut_tokens == fit.kept[0].start_tokens
    # The next call, with one more exchange, keeps that cut and extends the prefix.
    loop.add("user", 100)
    loop.add("assistant", 150)
    following = loop.fit(fit.state, policy, 5_000)
    assert not following.rebased
    assert _rendered(following)[: len(fit.kept)] == _rendered(fit)


def test_clearing_waits_for_the_minimum_and_then_cuts_instead() -> None:
    policy = CachePolicy(low_water_ratio=0.5, keep_tool_results=1, clear_at_least_tokens=50_000)
    fits = run_loop(policy, 8_000, 12, [1500])
    rebased = [f for f in fits if f.rebased]
    assert rebased
    assert all(not f.cleared_now and f.cleared_in_prompt == 0 for f in fits)
    assert all(f.dropped > 0 for f in rebased)


def test_excluded_tools_are_never_cleared() -> None:
    policy = CachePolicy(
        low_water_ratio=0.6,
        keep_tool_results=1,
        clear_at_least_tokens=100,
        exclude_tools=frozenset({"read_file"}),
    )
    fits = run_loop(policy, 8_000, 12, [900])
    assert any(f.rebased for f in fits)
    assert all(f.cleared_in_prompt == 0 for f in fits)
    assert all("cleared" not in str(m.content) for f in fits for m in f.kept)


def test_pairs_stay_intact_when_the_cut_falls_inside_a_tool_loop() -> None:
    # One user message, then a long tool loop: no user message to cut at.
    policy = CachePolicy(low_water_ratio=0.3, keep_tool_results=8, clear_at_least_tokens=10**6)
    loop = Loop()
    loop.add("user", 30)
    for n in range(20):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "grep", "arguments": ""}}
        loop.add("assistant", 20, content=None, tool_calls=[call])
        loop.add("tool", 400, tool_call_id=f"c{n}")
    fit = loop.fit(CacheState(), policy, 5_000)
    assert fit.rebased
    assert fit.dropped > 0
    assert fit.kept
    assert fit.kept[0].role == "assistant"
    assert _pairs_intact(fit)


def test_a_stored_state_is_respected_and_a_compaction_boundary_overrides_it() -> None:
    policy = CachePolicy(low_water_ratio=0.5, keep_tool_results=2, clear_at_least_tokens=500)
    loop = Loop()
    for n in range(6):
        loop.step(n, 300)
    state = CacheState(cut_sequence=8, cut_tokens=loop.messages[8].start_tokens)
    fit = loop.fit(state, policy, 100_000)
    assert not fit.rebased
    assert fit.kept[0].sequence_number == 8
    moved = cache_fit(
        loop.messages,
        CacheInput(policy, state, region_first=12, current_first=len(loop.messages), count=count),
        budget=100_000,
        fixed=SYSTEM,
        newer_tool_results=0,
    )
    assert moved.kept[0].sequence_number == 12


def _fit_with_blocks(
    loop: Loop, state: CacheState, budget: int, blocks: dict[int, int], compacted: int = 0
) -> CacheFit:
    cache = CacheInput(
        CachePolicy(),
        state,
        region_first=compacted,
        current_first=len(loop.messages),
        count=count,
        blocks=blocks,
        compacted_sequence=compacted,
    )
    return cache_fit(loop.messages, cache, budget=budget, fixed=SYSTEM + 30, newer_tool_results=0)


def test_frozen_blocks_count_from_the_floor_and_a_rebase_moves_it_to_the_current_turn() -> None:
    loop = Loop()
    for n in range(4):
        loop.step(n, 500)
    users = [m.sequence_number for m in loop.messages if m.role == "user"]
    blocks = dict.fromkeys(users, 200)
    plain = _fit_with_blocks(loop, CacheState(), 100_000, {})
    fit = _fit_with_blocks(loop, CacheState(prefix_floor=users[2]), 100_000, blocks)
    assert fit.tokens == plain.tokens + 2 * 200  # the two turns at or after the floor
    assert not fit.rebased
    assert fit.state.prefix_floor == users[2]
    # Too big for the budget: the rebase rewrites the prompt and drops every old block.
    tight = _fit_with_blocks(loop, CacheState(prefix_floor=users[2]), 2_000, blocks)
    assert tight.rebased
    assert tight.state.prefix_floor == len(loop.messages)
    assert all(m.token_count == loop.messages[m.sequence_number].token_count for m in tight.kept)


def test_a_compaction_boundary_past_the_floor_drops_the_old_blocks_too() -> None:
    loop = Loop()
    for n in range(4):
        loop.step(n, 500)
    users = [m.sequence_number for m in loop.messages if m.role == "user"]
    blocks = dict.fromkeys(users, 200)
    fit = _fit_with_blocks(loop, CacheState(), 100_000, blocks, compacted=users[1])
    assert not fit.rebased
    assert fit.state.prefix_floor == len(loop.messages)
    assert fit.tokens == sum(m.token_count for m in loop.messages[users[1] :])
