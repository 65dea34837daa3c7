"""When an LLM planner pays for itself: the design's table, first matching rule wins.

| rule (in order)                                   | plan? |
| ------------------------------------------------- | ----- |
| no artifacts                                      | no    |
| context.planning = never / always                 | no / yes |
| historical artifacts present                      | yes   |
| total size < min_total_chars (5K)                 | no    |
| an artifact > large_artifact_chars (10K)          | yes   |
| fits with fit_buffer_ratio (30 %) + cheap primary | no    |
| near or over the budget                           | yes   |
| expensive primary model                           | yes   |

The large-artifact rule is checked before the cheap-fit rule; after it, every row can decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.context.artifacts import Artifact

__all__ = ["PlanningDecision", "PlanningThresholds", "should_use_llm_planning"]


@dataclass(frozen=True, slots=True)
class PlanningThresholds:
    min_total_chars: int = 5_000
    large_artifact_chars: int = 10_000
    fit_buffer_ratio: float = 0.30


@dataclass(frozen=True, slots=True)
class PlanningDecision:
    use_llm: bool
    reason: str


def should_use_llm_planning(
    artifacts: list[Artifact],
    *,
    room_tokens: int,
    expensive_primary: bool,
    mode: Literal["auto", "always", "never"] = "auto",
    thresholds: PlanningThresholds | None = None,
) -> PlanningDecision:
    """Decide whether to ask the planner model.

    ``room_tokens`` is what the artifacts may take of the budget; artifact token counts are in
    ``Artifact.tokens``.
    """
    limits = thresholds or PlanningThresholds()
    if not artifacts:
        return PlanningDecision(False, "no artifacts")
    if mode == "never":
        return PlanningDecision(False, "context.planning=never")
    if mode == "always":
        return PlanningDecision(True, "context.planning=always")
    if any(a.historical for a in artifacts):
        return PlanningDecision(True, "historical artifacts present")
    total_chars = sum(a.size_chars for a in artifacts)
    if total_chars < limits.min_total_chars:
        return PlanningDecision(False, f"total {total_chars} chars < {limits.min_total_chars}")
    # Before the cheap-fit rule: a large artifact is worth a plan even when everything fits.
    largest = max(a.size_chars for a in artifacts)
    if largest > limits.large_artifact_chars:
        return PlanningDecision(
            True, f"an artifact of {largest} chars > {limits.large_artifact_chars}"
        )
    total_tokens = sum(a.tokens for a in artifacts)
    fits_with_buffer = total_tokens * (1 + limits.fit_buffer_ratio) <= room_tokens
    if fits_with_buffer and not expensive_primary:
        return PlanningDecision(False, "fits with buffer, cheap primary")
    if not fits_with_buffer:
        return PlanningDecision(True, "near or over the budget")
    return PlanningDecision(True, "expensive primary model")
