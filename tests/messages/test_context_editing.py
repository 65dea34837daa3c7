"""Anthropic's context editing mapped onto contextgate's policy (app/messages/context_editing.py):
parsing, the request's ``context`` it becomes, the fit it drives, and what is reported."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.context.cache_policy import cache_policy
from app.conversations.cache_state import CacheState
from app.core.settings import Settings
from app.messages.context_editing import (
    ContextManagement,
    edited_context,
    thinking_cleared,
    upstream_beta,
)
from app.messages.schemas import MessagesRequest
from app.protocol.chat import CacheOptions, ContextOptions
from tests.context.test_cache_fit import SYSTEM, Loop

BUDGET = 100_000


def edits(*items: Any) -> ContextManagement:
    return ContextManagement.model_validate({"edits": list(items)})


def clear(**fields: Any) -> dict[str, Any]:
    return {"type": "clear_tool_uses_20250919", **fields}


def tokens(value: int) -> dict[str, Any]:
    return {"type": "input_tokens", "value": value}


# ---- parsing ----------------------------------------------------------------------------


def test_anthropics_shapes_are_accepted() -> None:
    parsed = edits(
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
        clear(
            trigger=tokens(30_000),
            keep={"type": "tool_uses", "value": 3},
            clear_at_least=tokens(5_000),
            exclude_tools=["web_search"],
            clear_tool_inputs=["Bash"],
        ),
        {"type": "compact_20260112", "trigger": tokens(60_000), "instructions": "Be short."},
    )
    assert [e.type for e in parsed.edits] == [
        "clear_thinking_20251015",
        "clear_tool_uses_20250919",
        "compact_20260112",
    ]
    for keep in ("all", {"type": "all"}, None):
        edits({"type": "clear_thinking_20251015", "keep": keep})
    edits(clear(trigger={"type": "tool_uses", "value": 10}, clear_tool_inputs=True))
    assert edits().edits == []


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "clear_everything"},
        {"edits": "clear_tool_uses_20250919"},
        clear(trigger=tokens(0)),
        clear(trigger={"type": "turns", "value": 3}),
        clear(keep={"type": "tool_uses", "value": -1}),
        clear(keep={"type": "input_tokens", "value": 3}),
        clear(clear_at_least={"type": "tool_uses", "value": 3}),
        clear(exclude_tools="Bash"),
        clear(surprise=True),
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": -1}},
        {"type": "clear_thinking_20251015", "keep": "some"},
        {"type": "compact_20260112", "trigger": tokens(10_000)},
    ],
)
def test_bad_edits_are_refused(bad: dict[str, Any]) -> None:
    body = bad if "edits" in bad else {"edits": [bad]}
    with pytest.raises(ValidationError):
        ContextManagement.model_validate(body)


def test_an_edit_twice_is_refused() -> None:
    with pytest.raises(ValidationError, match="only once"):
        edits(clear(), clear(keep={"type": "tool_uses", "value": 1}))


def test_the_request_carries_it_apart_from_what_is_forwarded() -> None:
    body = MessagesRequest.model_validate(
        {
            "model": "m",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
            "context_management": {"edits": [clear()]},
        }
    )
    assert body.context_management is not None
    assert "context_management" not in (body.model_extra or {})


# ---- the request's policy ---------------------------------------------------------------


def test_clear_tool_uses_becomes_the_requests_cache_options() -> None:
    context = ContextOptions(cache=CacheOptions(exclude_tools=["mine"], low_water_ratio=0.2))
    edited = edited_context(
        edits(
            clear(
                trigger=tokens(30_000),
                keep={"type": "tool_uses", "value": 1},
                clear_at_least=tokens(2_000),
                exclude_tools=["Read", "mine"],
            )
        ),
        context,
        BUDGET,
    )
    cache = edited.cache
    assert cache.enabled is True
    assert cache.high_water_ratio is not None
    assert int(cache.high_water_ratio * BUDGET) == 30_000  # the fit's mark is the trigger
    assert cache.keep_tool_results == 1
    assert cache.clear_at_least_tokens == 2_000
    assert cache.exclude_tools == ["Read", "mine"]
    assert cache.low_water_ratio == 0.2  # what the edit does not speak of stays the request's
    assert context.cache.keep_tool_results is None  # the request's own options untouched


def test_omitted_fields_take_anthropics_defaults() -> None:
    cache = edited_context(edits(clear()), ContextOptions(), BUDGET).cache
    assert cache.high_water_ratio is not None
    assert int(cache.high_water_ratio * BUDGET) == 100_000
    assert cache.keep_tool_results == 3
    assert cache.clear_at_least_tokens == 0
    assert cache.exclude_tools is None
    # A trigger beyond the budget fires at the budget; a tool-use count keeps the policy's mark.
    small = edited_context(edits(clear()), ContextOptions(), 8_000).cache
    assert small.high_water_ratio == 1.0
    counted = edited_context(
        edits(clear(trigger={"type": "tool_uses", "value": 5})), ContextOptions(), BUDGET
    )
    assert counted.cache.high_water_ratio is None


def test_other_edits_leave_the_cache_policy_alone() -> None:
    context = ContextOptions(cache=CacheOptions(keep_tool_results=7))
    thinking = edits({"type": "clear_thinking_20251015", "keep": "all"})
    assert edited_context(thinking, context, BUDGET) == context
    compacted = edited_context(
        edits({"type": "compact_20260112", "trigger": tokens(60_000)}), context, BUDGET
    )
    assert compacted.cache == context.cache
    assert compacted.compaction_ratio is not None
    assert int(compacted.compaction_ratio * BUDGET) == 60_000
    default = edited_context(edits({"type": "compact_20260112"}), context, 200_000)
    assert default.compaction_ratio is not None
    assert int(default.compaction_ratio * 200_000) == 150_000


def test_the_operators_protected_tools_stay_protected() -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, cache_exclude_tools=["operator_tool"], cache_keep_tool_results=2,
        cache_clear_at_least_tokens=4000,
    )  # fmt: skip
    model = CacheOptions(keep_tool_results=5, exclude_tools=["model_tool"])
    cache = edited_context(
        edits(clear(keep={"type": "tool_uses", "value": 0}, exclude_tools=["client_tool"])),
        ContextOptions(),
        BUDGET,
    ).cache
    policy = cache_policy(settings, cache, model)
    assert policy.exclude_tools == {"operator_tool", "model_tool", "client_tool"}
    assert policy.keep_tool_results == 0  # the client's words win over model and deployment
    assert policy.clear_at_least_tokens == 0
    assert policy.enabled


def test_the_fit_clears_at_the_trigger_and_keeps_what_was_asked() -> None:
    """The mapped policy on the real fit: no clearing below the trigger, then one batch that
    keeps the newest result raw and never clears an excluded tool."""
    budget = 50_000
    trigger = 6_000
    cache = edited_context(
        edits(
            clear(
                trigger=tokens(trigger),
                keep={"type": "tool_uses", "value": 1},
                exclude_tools=["notes"],
            )
        ),
        ContextOptions(),
        budget,
    ).cache
    policy = cache_policy(Settings(_env_file=None), cache)  # type: ignore[call-arg]
    loop, state = Loop(), CacheState()
    fired_at = None
    for n in range(12):
        fit = loop.fit(state, policy, budget)
        sent = fit.tokens + SYSTEM + 30
        if fit.rebased:
            fired_at = n
            break
        assert sent <= trigger
        state = fit.state
        loop.step(n, 1_000, tool="notes" if n == 1 else "read_file")
    assert fired_at is not None
    raw = {m.sequence_number: m.token_count for m in loop.messages}
    tools = [m for m in fit.kept if m.role == "tool"]
    cleared = [m for m in tools if m.token_count != raw[m.sequence_number]]
    kept_raw = [m for m in tools if m.token_count == raw[m.sequence_number]]
    assert fit.cleared_in_prompt == len(cleared) > 0
    assert [m.tool_call_id for m in kept_raw] == ["call_1", f"call_{fired_at - 1}"]
    assert fit.tokens + SYSTEM + 30 <= trigger


def test_edit_betas_are_not_passed_on() -> None:
    assert upstream_beta("context-management-2025-06-27") is None
    assert (
        upstream_beta("interleaved-thinking-2025-05-14, context-management-2025-06-27")
        == "interleaved-thinking-2025-05-14"
    )
    assert upstream_beta("compact-2026-01-12,a,,b") == "a,b"


# ---- the report -------------------------------------------------------------------------


def _answer(call: str | None, thinking: str | None, text: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if call:
        function = {"name": "read", "arguments": "{}"}
        message["tool_calls"] = [{"id": call, "type": "function", "function": function}]
    if thinking:
        block = {"type": "thinking", "thinking": thinking, "signature": "sig"}
        message["thinking_blocks"] = [block]
        message["reasoning_content"] = thinking
    return message


def test_thinking_cleared_counts_turns_sent_without_their_thinking() -> None:
    client = [
        {"role": "user", "content": "one"},
        _answer("c1", "think one a"),
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        _answer(None, "think one b", "done one"),
        {"role": "user", "content": "two"},
        _answer(None, "think two", "done two"),
        {"role": "user", "content": "three"},
        _answer("c3", "think three"),
        {"role": "tool", "tool_call_id": "c3", "content": "r"},
    ]
    strip = {"thinking_blocks", "reasoning_content"}
    sent = [
        {k: v for k, v in m.items() if k not in strip} if i < 6 else m for i, m in enumerate(client)
    ]
    turns, cleared = thinking_cleared(client, sent, lambda text: len(text.split()))
    assert (turns, cleared) == (2, 8)  # turns one (two answers) and two; three kept its own
    assert thinking_cleared(client, client, len) == (0, 0)
    # An answer the fit dropped whole is not a thinking edit.
    assert thinking_cleared(client, sent[4:], lambda text: 1) == (1, 1)
