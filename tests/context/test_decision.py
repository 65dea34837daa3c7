"""should_use_llm_planning: the design's table at its boundaries."""

from __future__ import annotations

from app.context.artifacts import Artifact
from app.context.decision import PlanningThresholds, should_use_llm_planning
from tests.context.helpers import artifact


def _sized(tokens: int) -> Artifact:
    made = artifact("a", "word " * 1200)
    made.tokens = tokens
    return made


def test_no_artifacts_never_plans() -> None:
    assert not should_use_llm_planning([], room_tokens=10, expensive_primary=True).use_llm
    assert not should_use_llm_planning(
        [], room_tokens=10, expensive_primary=True, mode="always"
    ).use_llm


def test_modes_override_the_table() -> None:
    small = [artifact("a", "tiny")]
    assert should_use_llm_planning(
        small, room_tokens=10**6, expensive_primary=False, mode="always"
    ).use_llm
    big = [artifact("a", "x " * 20_000, historical=True)]
    assert not should_use_llm_planning(
        big, room_tokens=1, expensive_primary=True, mode="never"
    ).use_llm


def test_historical_artifacts_plan_even_when_small() -> None:
    decision = should_use_llm_planning(
        [artifact("h", "small", historical=True)], room_tokens=10**6, expensive_primary=False
    )
    assert decision.use_llm
    assert "historical" in decision.reason


def test_total_chars_boundary_at_5000() -> None:
    below = [artifact("a", "a" * 4999)]
    at = [artifact("a", "a" * 5000)]
    # Over budget and expensive, but under 5K chars: no planning.
    assert not should_use_llm_planning(below, room_tokens=1, expensive_primary=True).use_llm
    assert should_use_llm_planning(at, room_tokens=1, expensive_primary=True).use_llm


def test_fit_buffer_boundary_with_cheap_primary() -> None:
    a = _sized(1000)
    # 1000 tokens * 1.3 = 1300: fits with buffer at 1300, not at 1299.
    assert not should_use_llm_planning([a], room_tokens=1300, expensive_primary=False).use_llm
    near = should_use_llm_planning([a], room_tokens=1299, expensive_primary=False)
    assert near.use_llm
    assert "budget" in near.reason


def test_expensive_primary_plans_even_when_it_fits() -> None:
    a = _sized(1000)
    decision = should_use_llm_planning([a], room_tokens=10**6, expensive_primary=True)
    assert decision.use_llm
    assert "expensive" in decision.reason


def test_thresholds_are_configurable() -> None:
    a = artifact("a", "a" * 100)
    limits = PlanningThresholds(min_total_chars=50, fit_buffer_ratio=0.0)
    assert should_use_llm_planning(
        [a], room_tokens=0, expensive_primary=False, thresholds=limits
    ).use_llm
    assert not should_use_llm_planning([a], room_tokens=0, expensive_primary=False).use_llm
