"""Seed 001 in full: every row of should_use_llm_planning's table, each threshold setting
flipping the decision it names through the real engine, ContextGoal reaching the planner, and
ContextPlanningUsage (planner and summarizer tokens) in context_utilization."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.context.decision import PlanningThresholds, should_use_llm_planning
from app.core.settings import Settings
from tests.context.helpers import artifact
from tests.fake_upstream import FakeUpstream
from tests.support.models import fake_model_list

CHEAP = {"input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002}
BIG_ROOM = 10**6


# ---- the table, row by row (first matching rule wins) ----------------------------------------
def _doc(chars: int, name: str = "a", *, historical: bool = False) -> Any:
    return artifact(name, ("lorem ipsum " * (chars // 12 + 1))[:chars], historical=historical)


@pytest.mark.parametrize(
    ("artifacts", "room", "expensive", "use_llm", "reason"),
    [
        pytest.param([], 1, True, False, "no artifacts", id="no-artifacts"),
        pytest.param(
            [_doc(100, historical=True)], BIG_ROOM, False, True, "historical", id="historical"
        ),
        pytest.param([_doc(4_999)], 1, True, False, "< 5000", id="total-under-5k"),
        pytest.param([_doc(12_000)], BIG_ROOM, False, True, "> 10000", id="large-artifact"),
        pytest.param([_doc(6_000)], BIG_ROOM, False, False, "cheap primary", id="fits-cheap"),
        pytest.param([_doc(6_000)], 100, False, True, "budget", id="near-limit"),
        pytest.param([_doc(6_000)], BIG_ROOM, True, True, "expensive", id="expensive"),
    ],
)
def test_every_row_of_the_table_decides(
    artifacts: list[Any], room: int, expensive: bool, use_llm: bool, reason: str
) -> None:
    decision = should_use_llm_planning(artifacts, room_tokens=room, expensive_primary=expensive)
    assert decision.use_llm is use_llm
    assert reason in decision.reason


def test_a_large_artifact_asks_the_planner_even_when_all_fits_on_a_cheap_model() -> None:
    small, large = _doc(3_000, "s"), _doc(10_001, "l")
    decision = should_use_llm_planning(
        [small, large], room_tokens=BIG_ROOM, expensive_primary=False
    )
    assert decision.use_llm
    assert "10001 chars" in decision.reason
    at_threshold = should_use_llm_planning(
        [small, _doc(10_000, "l")], room_tokens=BIG_ROOM, expensive_primary=False
    )
    assert not at_threshold.use_llm  # "> 10K": exactly 10K does not count


def test_each_threshold_moves_its_own_boundary() -> None:
    doc = _doc(6_000)
    tokens = doc.tokens
    cheap = {"expensive_primary": False}
    # min_total_chars: 6K under a 7K minimum is "too small" even when over the budget
    assert not should_use_llm_planning(
        [doc], room_tokens=1, thresholds=PlanningThresholds(min_total_chars=7_000), **cheap
    ).use_llm
    # large_artifact_chars: 6K is "large" under a 5K threshold
    assert should_use_llm_planning(
        [doc],
        room_tokens=BIG_ROOM,
        thresholds=PlanningThresholds(large_artifact_chars=5_000),
        **cheap,
    ).use_llm
    # fit_buffer_ratio: exactly fits without buffer, not with the default 30 %
    assert should_use_llm_planning([doc], room_tokens=tokens, **cheap).use_llm
    assert not should_use_llm_planning(
        [doc], room_tokens=tokens, thresholds=PlanningThresholds(fit_buffer_ratio=0.0), **cheap
    ).use_llm


# ---- through the engine: each setting changes the decision it names -------------------------
async def _client(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake: FakeUpstream,
    tmp_path: Path,
    **overrides: Any,
) -> httpx.AsyncClient:
    settings = make_settings(
        planner_model="fake-planner",
        summarizer_model="fake-summarizer",
        config=fake_model_list(
            tmp_path, fake, ("fake-model", "fake-planner", "fake-summarizer"), model_info=CHEAP
        ),
        **overrides,
    )
    client: httpx.AsyncClient = await client_for(settings)
    return client


def _planner_calls(fake: FakeUpstream) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests() if (r["body"] or {}).get("model") == "fake-planner"]


async def _ask(
    client: httpx.AsyncClient, chars: int, context: dict[str, Any] | None = None
) -> dict[str, Any]:
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "What does the report say about lorem?"}],
        "attachments": [{"content": ("lorem ipsum " * (chars // 12 + 1))[:chars], "title": "r"}],
        "context": {"max_input_tokens": 60_000, **(context or {})},
    }
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


EXPENSIVE = {"expensive_input_cost_per_token": 0.000001}  # the fake model's price: expensive


@pytest.mark.parametrize(
    ("chars", "baseline", "changed"),
    [
        # 3K chars on an expensive primary: too small by default, worth a plan under a 2K minimum
        pytest.param(
            3_000, EXPENSIVE, {**EXPENSIVE, "planning_min_total_chars": 2_000},
            id="CONTEXTGATE_PLANNING_MIN_TOTAL_CHARS",
        ),
        # 6K chars that fit on a cheap model: no plan by default, "large" under a 5K threshold
        pytest.param(
            6_000, {}, {"planning_large_artifact_chars": 5_000},
            id="CONTEXTGATE_PLANNING_LARGE_ARTIFACT_CHARS",
        ),
        # ~1,000 tokens in a 60,000-token budget: fit with a 30 % buffer, not with 100x
        pytest.param(
            6_000, {}, {"planning_fit_buffer_ratio": 100.0},
            id="CONTEXTGATE_PLANNING_FIT_BUFFER_RATIO",
        ),
        # 6K chars that fit: cheap at the default price threshold, expensive at a lower one
        pytest.param(6_000, {}, EXPENSIVE, id="CONTEXTGATE_EXPENSIVE_INPUT_COST_PER_TOKEN"),
    ],
)  # fmt: skip
async def test_each_threshold_setting_changes_the_decision_it_names(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
    chars: int,
    baseline: dict[str, Any],
    changed: dict[str, Any],
) -> None:
    before = await _client(client_for, make_settings, fake_upstream, tmp_path, **baseline)
    await _ask(before, chars)
    assert _planner_calls(fake_upstream) == []

    after = await _client(client_for, make_settings, fake_upstream, tmp_path, **changed)
    result = await _ask(after, chars)
    assert len(_planner_calls(fake_upstream)) == 1
    # the fake planner answers "{}" (no plan): the request goes on with the deterministic plan
    assert any("planner failed" in note for note in result["context_utilization"]["notes"])


async def test_large_artifact_on_a_cheap_primary_asks_the_planner_end_to_end(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    client = await _client(client_for, make_settings, fake_upstream, tmp_path)
    await _ask(client, 9_000)
    assert _planner_calls(fake_upstream) == []
    await _ask(client, 12_000)
    assert len(_planner_calls(fake_upstream)) == 1


# ---- ContextGoal and ContextPlanningUsage ----------------------------------------------------
async def test_goal_reaches_the_planner_and_planning_usage_reports_tokens(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    client = await _client(client_for, make_settings, fake_upstream, tmp_path)
    plan = {
        "artifacts": [
            {"artifact_id": "inline_0", "strategy": "summarize", "priority": 1,
             "summarization_focus": "churn"}
        ],
        "reasoning": "summarize for the board",
    }  # fmt: skip
    fake_upstream.script("fake-planner", [orjson.dumps(plan).decode()])
    fake_upstream.script("fake-summarizer", ["Churn fell to 2.1 %."])
    goal = {"task": "Write the board's Q3 summary", "focus": ["churn"], "audience": "board"}
    result = await _ask(client, 12_000, {"goal": goal})
    utilization = result["context_utilization"]
    assert utilization["llm_planning_used"] is True
    assert utilization["goal"] == goal
    [planner_call] = _planner_calls(fake_upstream)
    prompt = planner_call["messages"][1]["content"]
    assert "<goal>\nWrite the board's Q3 summary; focus: churn; audience: board\n</goal>" in prompt

    usage = utilization["planning_usage"]
    assert usage["planner_calls"] == 1
    assert usage["planner_prompt_tokens"] > 100  # the previews were sent
    assert usage["planner_completion_tokens"] > 0
    assert usage["summarizer_calls"] == 1
    assert usage["summarizer_prompt_tokens"] > 0
    assert usage["summarizer_completion_tokens"] > 0
    assert usage["total_tokens"] == sum(
        usage[k]
        for k in (
            "planner_prompt_tokens",
            "planner_completion_tokens",
            "summarizer_prompt_tokens",
            "summarizer_completion_tokens",
        )
    )
    assert utilization["planning_cost"]["planner_cost"] > 0


async def test_goal_as_a_string_and_a_bad_goal_is_400(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    client = await _client(client_for, make_settings, fake_upstream, tmp_path)
    result = await _ask(client, 100, {"goal": "pick a restaurant"})
    assert result["context_utilization"]["goal"]["task"] == "pick a restaurant"
    assert result["context_utilization"]["planning_usage"]["total_tokens"] == 0
    before = len(fake_upstream.requests())
    bad = await client.post(
        "/v1/chat/completions",
        json={
            "model": "fake-model",
            "messages": [{"role": "user", "content": "hi"}],
            "context": {"goal": {"task": ""}},
        },
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] is not None or "goal" in bad.json()["error"]["message"]
    assert len(fake_upstream.requests()) == before
