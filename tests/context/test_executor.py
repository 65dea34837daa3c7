"""Plan execution: never over budget, one outcome per artifact, degradation, summaries."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.context.artifacts import Artifact, ArtifactDecision, ArtifactPlan, ProcessingStrategy
from app.context.executor import ExecutionLimits, Processors, execute_plan
from app.context.render import render_piece
from app.summary_cache.summary import CachedSummary
from tests.context.helpers import artifact, count, truncate

WORDS = ["alpha", "beta", "gamma", "delta", "revenue", "river", "storm", "castle", "quartz"]


async def _long_summary(a: Artifact, focus: str, max_tokens: int) -> CachedSummary:
    # Deliberately longer than any allotment: the executor must cut it.
    return CachedSummary(("summary of " + a.id + " ") * 300, hit=False, cost=0.001)


def _min_cost(a: Artifact) -> int:
    full = count(render_piece(a, a.content, ProcessingStrategy.INCLUDE_FULL))
    return min(full, count(render_piece(a, "", ProcessingStrategy.EXCLUDE)))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Artifact], ArtifactPlan, int]:
    n = draw(st.integers(1, 6))
    artifacts = []
    decisions = []
    for i in range(n):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=400))
        paragraphs = " ".join(words).replace("castle", "castle\n\n")
        artifacts.append(artifact(f"a{i}", paragraphs, tool=draw(st.booleans())))
        decisions.append(
            ArtifactDecision(
                artifact_id=f"a{i}",
                strategy=draw(st.sampled_from(list(ProcessingStrategy))),
                priority=draw(st.integers(1, 10)),
            )
        )
    if draw(st.booleans()):
        decisions = decisions[: draw(st.integers(0, n))]  # some artifacts unplanned
    room = draw(st.integers(0, 3000))
    return artifacts, ArtifactPlan(artifacts=decisions), room


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(scenarios())
def test_execution_never_exceeds_the_budget(
    scenario: tuple[list[Artifact], ArtifactPlan, int],
) -> None:
    artifacts, plan, room = scenario
    result = asyncio.run(
        execute_plan(
            artifacts,
            plan,
            room=room,
            question="revenue storm",
            tools=Processors(
                count,
                truncate,
                _long_summary,
                limits=ExecutionLimits(max_summaries=2, concurrency=2),
            ),
        )
    )
    assert sorted(o.artifact.id for o in result.outcomes) == sorted(a.id for a in artifacts)
    floor = sum(_min_cost(a) for a in artifacts)
    if room >= floor:
        assert result.tokens <= room
    else:
        assert result.tokens <= floor
    for outcome in result.outcomes:
        rendered = render_piece(outcome.artifact, outcome.text, outcome.strategy)
        assert count(rendered) == outcome.tokens


async def test_degrades_lowest_priorities_first() -> None:
    high = artifact("high", "revenue grew " * 200)
    low = artifact("low", "revenue fell " * 200)
    plan = ArtifactPlan(
        artifacts=[
            ArtifactDecision(
                artifact_id="low", strategy=ProcessingStrategy.INCLUDE_FULL, priority=9
            ),
            ArtifactDecision(
                artifact_id="high", strategy=ProcessingStrategy.INCLUDE_FULL, priority=1
            ),
        ]
    )
    room = high.tokens + 150
    result = await execute_plan(
        [low, high], plan, room=room, question="revenue", tools=Processors(count, truncate)
    )
    by_id = {o.artifact.id: o for o in result.outcomes}
    assert by_id["high"].strategy == ProcessingStrategy.INCLUDE_FULL
    assert by_id["low"].strategy == ProcessingStrategy.RAG_EXTRACT
    assert result.tokens <= room


async def test_summaries_run_concurrently_within_the_cap() -> None:
    running = 0
    peak = 0
    calls = 0

    async def summarize(a: Artifact, focus: str, max_tokens: int) -> CachedSummary:
        nonlocal running, peak, calls
        calls += 1
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return CachedSummary(f"short summary of {a.id}", hit=False, cost=0.5)

    artifacts = [artifact(f"d{i}", "storm river " * 300) for i in range(5)]
    plan = ArtifactPlan(
        artifacts=[
            ArtifactDecision(artifact_id=a.id, strategy=ProcessingStrategy.SUMMARIZE)
            for a in artifacts
        ]
    )
    result = await execute_plan(
        artifacts,
        plan,
        room=5000,
        question="storm",
        tools=Processors(
            count, truncate, summarize, limits=ExecutionLimits(max_summaries=3, concurrency=2)
        ),
    )
    assert calls == 3
    assert peak == 2
    strategies = [o.strategy for o in result.outcomes]
    assert strategies.count(ProcessingStrategy.SUMMARIZE) == 3
    assert strategies.count(ProcessingStrategy.RAG_EXTRACT) == 2
    assert result.summarizer_cost == 1.5
    assert any("cap" in n for n in result.notes)


async def test_failing_summarizer_falls_back_to_extraction() -> None:
    async def broken(a: Artifact, focus: str, max_tokens: int) -> CachedSummary:
        raise RuntimeError("down")

    doc = artifact("d", "storm river castle " * 300)
    plan = ArtifactPlan(
        artifacts=[ArtifactDecision(artifact_id="d", strategy=ProcessingStrategy.SUMMARIZE)]
    )
    result = await execute_plan(
        [doc], plan, room=400, question="storm", tools=Processors(count, truncate, broken)
    )
    assert result.outcomes[0].strategy == ProcessingStrategy.RAG_EXTRACT
    assert result.outcomes[0].text
    assert any("summarizer failed" in n for n in result.notes)
