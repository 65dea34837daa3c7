"""The deterministic plan: BM25 relevance to the question, no model call.

Everything fits → include all (nothing is ranked: an agent's tool-loop step brings one result
that fits, and indexing it for BM25 cost ~10% of the call). Otherwise, in order of relevance:
small relevant artifacts in full, large relevant ones by extraction, irrelevant ones excluded.
"""

from __future__ import annotations

from app.context.artifacts import Artifact, ArtifactDecision, ArtifactPlan, ProcessingStrategy
from app.context.ranking import bm25_scores

__all__ = ["deterministic_decision", "deterministic_plan", "everything_fits", "relevance_order"]

SMALL_SHARE = 0.25  # an artifact is "small" when it takes at most this share of the room


def relevance_order(question: str, artifacts: list[Artifact]) -> list[tuple[Artifact, float]]:
    """Artifacts with their BM25 scores, most relevant first (stable for ties)."""
    scores = bm25_scores(question, [f"{a.title or ''} {a.source}\n{a.content}" for a in artifacts])
    ranked = sorted(zip(artifacts, scores, strict=True), key=lambda pair: -pair[1])
    return ranked


def deterministic_decision(
    artifact: Artifact, score: float, *, priority: int, question: str, room: int, fits: bool
) -> ArtifactDecision:
    if fits:
        strategy = ProcessingStrategy.INCLUDE_FULL
        why = "everything fits"
    elif score <= 0:
        strategy = ProcessingStrategy.EXCLUDE
        why = "no term of the question occurs in it"
    elif artifact.tokens <= room * SMALL_SHARE:
        strategy = ProcessingStrategy.INCLUDE_FULL
        why = "relevant and small"
    else:
        strategy = ProcessingStrategy.RAG_EXTRACT
        why = "relevant and large"
    return ArtifactDecision(
        artifact_id=artifact.id,
        strategy=strategy,
        priority=priority,
        relevance_rationale=f"deterministic: {why} (bm25 {score:.2f})",
        extraction_query=question if strategy == ProcessingStrategy.RAG_EXTRACT else None,
    )


def everything_fits(artifacts: list[Artifact], room: int) -> bool:
    return sum(a.tokens for a in artifacts) <= room


def deterministic_plan(question: str, artifacts: list[Artifact], room: int) -> ArtifactPlan:
    fits = everything_fits(artifacts, room)
    if fits:  # every one included in full, whatever its relevance: nothing to rank
        return ArtifactPlan(
            artifacts=[
                ArtifactDecision(
                    artifact_id=artifact.id,
                    strategy=ProcessingStrategy.INCLUDE_FULL,
                    priority=min(index + 1, 100),
                    relevance_rationale="deterministic: everything fits",
                )
                for index, artifact in enumerate(artifacts)
            ],
            reasoning="deterministic plan: everything fits",
        )
    ranked = relevance_order(question, artifacts)
    decisions = [
        deterministic_decision(
            artifact, score, priority=min(index + 1, 100), question=question, room=room, fits=fits
        )
        for index, (artifact, score) in enumerate(ranked)
    ]
    return ArtifactPlan(artifacts=decisions, reasoning="deterministic (BM25) plan")
