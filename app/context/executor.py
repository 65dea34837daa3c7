"""Execute an ArtifactPlan within a token budget, whatever the plan asks for.

Allocation walks the decisions in priority order (1 first). Every artifact's cheapest form
(nothing for a document, a short marker for a tool result) is reserved up front; each
decision then takes what it needs from the rest, degrading full → extract → summary →
exclude when it does not fit. Summaries (cached, bounded in number and concurrency) and
extractions then run, and each result is cut to its allotment, so the total never exceeds
the room.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from app.context.artifacts import Artifact, ArtifactDecision, ArtifactPlan
from app.context.artifacts import ProcessingStrategy as S
from app.context.ranking import Embedder, chunk_text, rank_chunks
from app.context.render import render_piece
from app.summary_cache.summary import CachedSummary

__all__ = ["ExecutionLimits", "ExecutionResult", "Outcome", "Summarize", "execute_plan"]

logger = logging.getLogger(__name__)

# (artifact, focus, max_tokens) -> summary (from the cache or the summarizer)
Summarize = Callable[[Artifact, str, int], Awaitable[CachedSummary]]
Count = Callable[[str], int]
Truncate = Callable[[str, int], str]

_CHAIN = {
    S.INCLUDE_FULL: (S.INCLUDE_FULL, S.RAG_EXTRACT, S.SUMMARIZE, S.EXCLUDE),
    S.RAG_EXTRACT: (S.RAG_EXTRACT, S.SUMMARIZE, S.EXCLUDE),
    S.SUMMARIZE: (S.SUMMARIZE, S.RAG_EXTRACT, S.EXCLUDE),
    S.EXCLUDE: (S.EXCLUDE,),
}
_GAP = "\n[…]\n"


@dataclass(frozen=True, slots=True)
class ExecutionLimits:
    max_summaries: int = 8
    concurrency: int = 4
    summary_max_tokens: int = 400
    min_summary_tokens: int = 48
    min_extract_tokens: int = 64
    chunk_chars: int = 1200


@dataclass(frozen=True, slots=True)
class Processors:
    """How the executor measures, cuts, summarizes and ranks text (the engine's model calls;
    without ``summarize``/``embedder``: no summaries, lexical ranking)."""

    count: Count
    truncate: Truncate
    summarize: Summarize | None = None
    embedder: Embedder | None = None
    limits: ExecutionLimits = field(default_factory=ExecutionLimits)


@dataclass(slots=True)
class Outcome:
    artifact: Artifact
    strategy: S
    text: str = ""  # what is rendered ('' for an excluded document)
    tokens: int = 0
    cache_hit: bool = False
    allot: int = 0
    query: str = ""


@dataclass(slots=True)
class ExecutionResult:
    outcomes: list[Outcome]
    summarizer_cost: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(o.tokens for o in self.outcomes)


class _Executor:
    def __init__(self, question: str, tools: Processors) -> None:
        self.question = question
        self.count = tools.count
        self.truncate = tools.truncate
        self.summarize = tools.summarize
        self.embedder = tools.embedder
        self.limits = tools.limits
        self.result = ExecutionResult(outcomes=[])

    def cost(self, artifact: Artifact, text: str, strategy: S) -> int:
        return self.count(render_piece(artifact, text, strategy))

    # ---- allocation -------------------------------------------------------------------
    def allocate(self, artifacts: list[Artifact], plan: ArtifactPlan, room: int) -> list[Outcome]:
        by_id = {d.artifact_id: d for d in plan.artifacts}
        order = sorted(
            range(len(artifacts)),
            key=lambda i: (by_id[artifacts[i].id].priority if artifacts[i].id in by_id else 100, i),
        )
        full = [self.cost(a, a.content, S.INCLUDE_FULL) for a in artifacts]
        floor = [min(full[i], self.cost(a, "", S.EXCLUDE)) for i, a in enumerate(artifacts)]
        remaining = room - sum(floor)
        wanted = {d.artifact_id for d in plan.artifacts if d.strategy != S.EXCLUDE}
        wrappers = sum(
            self.cost(a, "", S.RAG_EXTRACT) - floor[i]
            for i, a in enumerate(artifacts)
            if a.id in wanted
        )
        share = max(self.limits.min_extract_tokens, (remaining - wrappers) // max(1, len(wanted)))
        summaries_left = self.limits.max_summaries if self.summarize else 0
        outcomes: list[Outcome | None] = [None] * len(artifacts)
        for i in order:
            artifact = artifacts[i]
            decision = by_id.get(artifact.id) or ArtifactDecision(
                artifact_id=artifact.id, strategy=S.EXCLUDE
            )
            avail = remaining + floor[i]
            outcome = self._choose(artifact, decision, full[i], floor[i], avail, share)
            if outcome.strategy == S.SUMMARIZE:
                if summaries_left <= 0:
                    outcome.strategy = S.RAG_EXTRACT
                    self._note("summarizer call cap reached: extracting instead")
                summaries_left -= 1
            remaining -= outcome.tokens - floor[i]
            outcomes[i] = outcome
        return [o for o in outcomes if o is not None]

    def _choose(
        self,
        artifact: Artifact,
        decision: ArtifactDecision,
        full: int,
        floor: int,
        avail: int,
        share: int,
    ) -> Outcome:
        if full <= floor:  # tiny: its full form is as cheap as its marker
            return Outcome(artifact, S.INCLUDE_FULL, artifact.content, full)
        wrapper = self.cost(artifact, "", S.RAG_EXTRACT)
        for strategy in _CHAIN[decision.strategy]:
            if strategy == S.INCLUDE_FULL and full <= avail:
                return Outcome(artifact, S.INCLUDE_FULL, artifact.content, full)
            if strategy == S.RAG_EXTRACT:
                allot = min(avail - wrapper, max(share, self.limits.min_extract_tokens))
                allot = min(allot, artifact.tokens or allot)
                if allot >= self.limits.min_extract_tokens:
                    query = decision.extraction_query or decision.summarization_focus
                    return Outcome(
                        artifact,
                        S.RAG_EXTRACT,
                        tokens=wrapper + allot,
                        allot=allot,
                        query=query or self.question,
                    )
            if strategy == S.SUMMARIZE and self.summarize is not None:
                allot = min(avail - wrapper, self.limits.summary_max_tokens)
                if allot >= self.limits.min_summary_tokens:
                    focus = decision.summarization_focus or decision.extraction_query
                    return Outcome(
                        artifact,
                        S.SUMMARIZE,
                        tokens=wrapper + allot,
                        allot=allot,
                        query=focus or self.question,
                    )
        return Outcome(artifact, S.EXCLUDE, tokens=floor)

    # ---- execution --------------------------------------------------------------------
    async def run(self, outcomes: list[Outcome]) -> None:
        semaphore = asyncio.Semaphore(max(1, self.limits.concurrency))

        async def summary(outcome: Outcome) -> None:
            async with semaphore:
                await self._summarize(outcome)

        extracts = [o for o in outcomes if o.strategy == S.RAG_EXTRACT]
        await asyncio.gather(
            self._extract_many(extracts),
            *(summary(o) for o in outcomes if o.strategy == S.SUMMARIZE),
        )
        for outcome in outcomes:
            self._seal(outcome)
        self.result.outcomes = outcomes

    async def _summarize(self, outcome: Outcome) -> None:
        assert self.summarize is not None
        try:
            summary = await self.summarize(outcome.artifact, outcome.query, outcome.allot)
        except Exception as exc:
            logger.warning("summarizer failed", extra={"error": str(exc)[:200]})
            self._note(f"summarizer failed ({type(exc).__name__}): extracted instead")
            outcome.strategy = S.RAG_EXTRACT
            await self._extract(outcome)
            return
        outcome.text = summary.text
        outcome.cache_hit = summary.hit
        self.result.summarizer_cost += summary.cost
        if summary.hit:
            self.result.cache_hits += 1
        else:
            self.result.cache_misses += 1
        if summary.note:
            self._note(summary.note)

    async def _extract(self, outcome: Outcome) -> None:
        await self._extract_many([outcome])

    async def _extract_many(self, outcomes: list[Outcome]) -> None:
        """Extractions sharing a query are ranked together: one index, one embeddings call."""
        groups: dict[str, list[Outcome]] = {}
        for outcome in outcomes:
            groups.setdefault(outcome.query, []).append(outcome)
        for query, group in groups.items():
            chunked = [chunk_text(o.artifact.content, self._chunk_chars(o)) for o in group]
            flat = [chunk for chunks in chunked for chunk in chunks]
            scores, note = await rank_chunks(query, flat, self.embedder)
            if note:
                self._note(note)
            start = 0
            for outcome, chunks in zip(group, chunked, strict=True):
                self._select(outcome, chunks, scores[start : start + len(chunks)])
                start += len(chunks)

    def _chunk_chars(self, outcome: Outcome) -> int:
        # About half the allotment (~4 chars a token), so that at least two chunks fit.
        return max(200, min(self.limits.chunk_chars, outcome.allot * 2))

    def _select(self, outcome: Outcome, chunks: list[str], scores: list[float]) -> None:
        """The best chunks that fit the allotment, in document order."""
        chosen: list[int] = []
        used = 0
        for index in sorted(range(len(chunks)), key=lambda i: -scores[i]):
            tokens = self.count(chunks[index]) + 3
            if used + tokens <= outcome.allot:
                chosen.append(index)
                used += tokens
        if not chosen and chunks:
            best = max(range(len(chunks)), key=lambda i: scores[i])
            outcome.text = self.truncate(chunks[best], outcome.allot)
            return
        outcome.text = _GAP.join(chunks[i] for i in sorted(chosen))

    def _seal(self, outcome: Outcome) -> None:
        """Measure the rendered form; cut it to the reserved tokens if it came out longer."""
        reserved = outcome.tokens
        if outcome.strategy in (S.INCLUDE_FULL, S.EXCLUDE):
            outcome.tokens = self.cost(outcome.artifact, outcome.text, outcome.strategy)
            return
        actual = self.cost(outcome.artifact, outcome.text, outcome.strategy)
        keep = self.count(outcome.text)
        while actual > reserved and outcome.text:
            keep = max(0, keep - (actual - reserved) - 1)
            outcome.text = self.truncate(outcome.text, keep)
            actual = self.cost(outcome.artifact, outcome.text, outcome.strategy)
        if actual > reserved or not outcome.text:
            outcome.strategy, outcome.text = S.EXCLUDE, ""
            actual = self.cost(outcome.artifact, "", S.EXCLUDE)
        outcome.tokens = actual

    def _note(self, note: str) -> None:
        if note not in self.result.notes:
            self.result.notes.append(note)


async def execute_plan(
    artifacts: list[Artifact],
    plan: ArtifactPlan,
    *,
    room: int,
    question: str,
    tools: Processors,
) -> ExecutionResult:
    """Process every artifact exactly once; the outcomes' tokens sum to at most ``room``
    (unless even the cheapest forms, i.e. the tool results' markers, exceed it)."""
    executor = _Executor(question, tools)
    outcomes = executor.allocate(artifacts, plan, room)
    await executor.run(outcomes)
    return executor.result
