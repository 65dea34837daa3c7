"""What the context engine did for a request (``EngineResult``), and how it is written into
the request's ContextUtilization once the window has been assembled (``annotate``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.context.artifacts import Artifact, ArtifactPlan
from app.context.budget import TokenBudget
from app.context.executor import ExecutionResult
from app.context.metadata import (
    ArtifactOutcome,
    ContextPlanningUsage,
    ContextUtilization,
    PlannerDecision,
)
from app.protocol.goal import ContextGoal

__all__ = ["EngineResult", "decision_view"]


@dataclass(slots=True)
class EngineResult:
    """What the engine did. ``budget``: the one it was given, with ``current`` of the turn as
    rewritten (the same budget when there was nothing to process)."""

    budget: TokenBudget
    artifacts: list[Artifact] = field(default_factory=list)
    execution: ExecutionResult | None = None
    strategy: str = "simple"
    llm_planning_used: bool = False
    planner_cost: float = 0.0
    usage: ContextPlanningUsage = field(default_factory=ContextPlanningUsage)
    goal: ContextGoal | None = None
    artifact_tokens: int = 0  # block + processed tool messages of the current turn
    notes: list[str] = field(default_factory=list)
    decision: PlannerDecision | None = None

    def annotate(self, utilization: ContextUtilization) -> None:
        utilization.goal = self.goal
        if not self.artifacts or self.execution is None:
            utilization.notes.extend(self.notes)
            return
        execution = self.execution
        utilization.strategy = self.strategy
        utilization.llm_planning_used = self.llm_planning_used
        utilization.artifacts_processed = [
            ArtifactOutcome(
                artifact_id=o.artifact.id,
                source=o.artifact.source,
                artifact_type=o.artifact.artifact_type.value,
                strategy=o.strategy.value,
                original_size_chars=o.artifact.size_chars,
                processed_size_chars=len(o.text),
                cache_hit=o.cache_hit,
                title=o.artifact.title,
            )
            for o in execution.outcomes
        ]
        if self.decision is not None:
            self.decision.cost = self.planner_cost
            utilization.planner_decision = self.decision
        cost = utilization.planning_cost
        cost.planner_cost += self.planner_cost
        cost.summarizer_cost += execution.summarizer_cost
        cost.total_cost = cost.planner_cost + cost.summarizer_cost
        utilization.planning_usage.merge(self.usage)
        utilization.cache_stats.hits += execution.cache_hits
        utilization.cache_stats.misses += execution.cache_misses
        moved = min(self.artifact_tokens, utilization.breakdown.current)
        utilization.breakdown.artifacts += moved
        utilization.breakdown.current -= moved
        utilization.notes.extend(n for n in [*self.notes, *execution.notes] if n)


def decision_view(
    planner: Literal["llm", "deterministic"],
    reason: str,
    plan: ArtifactPlan,
    model: str | None = None,
) -> PlannerDecision:
    return PlannerDecision(
        planner=planner,
        reason=reason,
        model=model,
        reasoning=plan.reasoning[:2000],
        decisions=[
            d.model_dump(mode="json", exclude_defaults=True) | {"artifact_id": d.artifact_id}
            for d in plan.artifacts
        ],
    )
