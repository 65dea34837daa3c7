"""BM25 ranking, chunking and the deterministic plan."""

from __future__ import annotations

import re

import pytest

import app.context.deterministic as deterministic
from app.context.artifacts import ArtifactDecision, ArtifactPlan, ProcessingStrategy
from app.context.deterministic import deterministic_plan
from app.context.executor import Processors, execute_plan
from app.context.ranking import bm25_scores, chunk_text, rank_chunks
from tests.context.helpers import artifact, count, truncate


def test_bm25_prefers_matching_documents_and_survives_stopwords() -> None:
    scores = bm25_scores("castle on the hill", ["a castle stands", "river flows", "the of and"])
    assert scores[0] > 0
    assert scores[1] == 0
    assert bm25_scores("the", ["the of", "and"]) == [0.0, 0.0]
    assert bm25_scores("x", []) == []


def test_chunks_keep_order_and_size() -> None:
    text = "para one\n\n" + "line\n" * 600 + "\n\n" + "z" * 3000
    chunks = chunk_text(text, max_chars=500)
    assert chunks[0] == "para one"
    assert all(len(c) <= 500 for c in chunks)
    assert re.sub(r"\s", "", "".join(chunks)) == re.sub(r"\s", "", text)
    sentences = chunk_text("First sentence here. " * 30, max_chars=100)
    assert all(c.endswith("here.") for c in sentences)


def test_deterministic_plan_excludes_irrelevant_when_over_budget() -> None:
    relevant = artifact("r", "the merger of acme and globex closed in march " * 40)
    irrelevant = artifact("i", "weather forecast rain tomorrow " * 40)
    small = artifact("s", "acme merger price: 12 dollars")
    plan = deterministic_plan("when did the acme merger close", [relevant, irrelevant, small], 300)
    by_id = {d.artifact_id: d for d in plan.artifacts}
    assert by_id["i"].strategy == ProcessingStrategy.EXCLUDE
    assert by_id["s"].strategy == ProcessingStrategy.INCLUDE_FULL
    assert by_id["r"].strategy == ProcessingStrategy.RAG_EXTRACT
    everything = deterministic_plan("acme", [relevant, irrelevant], 10_000)
    assert {d.strategy for d in everything.artifacts} == {ProcessingStrategy.INCLUDE_FULL}


async def test_rag_extract_keeps_the_answer_in_document_order() -> None:
    filler = [f"Paragraph {i} talks about gardening and tomatoes." for i in range(40)]
    filler[25] = "The vault code is 4471 and the vault is in Zurich."
    filler[30] = "The vault was opened in 1999."
    doc = artifact("d", "\n\n".join(filler))
    plan = ArtifactPlan(
        artifacts=[
            ArtifactDecision(
                artifact_id="d",
                strategy=ProcessingStrategy.RAG_EXTRACT,
                extraction_query="vault code",
            )
        ]
    )
    result = await execute_plan(
        [doc], plan, room=120, question="?", tools=Processors(count, truncate)
    )
    text = result.outcomes[0].text
    assert "4471" in text
    assert text.index("4471") < text.index("1999")
    assert "tomatoes" not in text or len(text) < len(doc.content) / 3


async def test_rank_chunks_uses_embeddings_and_falls_back() -> None:
    async def embed(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] if "vault" in t else [0.0, 1.0] for t in texts]

    async def broken(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("no embeddings")

    scores, note = await rank_chunks("vault", ["garden", "vault here"], embed)
    assert scores[1] > scores[0]
    assert note is None
    scores, note = await rank_chunks("vault", ["garden", "vault here"], broken)
    assert scores[1] > scores[0]
    assert note is not None


def test_nothing_is_ranked_when_everything_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent's loop step brings one result that fits: it is included without indexing it
    for BM25 (which cost ~10% of such a call); ranking only decides what does not fit."""

    def no_ranking(*_args: object) -> list[float]:
        raise AssertionError("ranked although everything fits")

    monkeypatch.setattr(deterministic, "bm25_scores", no_ranking)
    results = [artifact("a", "one file " * 50), artifact("b", "another file " * 50)]
    plan = deterministic_plan("which file", results, 10_000)
    assert [(d.artifact_id, d.strategy, d.priority) for d in plan.artifacts] == [
        ("a", ProcessingStrategy.INCLUDE_FULL, 1),
        ("b", ProcessingStrategy.INCLUDE_FULL, 2),
    ]
    with pytest.raises(AssertionError, match="ranked"):
        deterministic_plan("which file", results, 10)  # over the room: ranked
