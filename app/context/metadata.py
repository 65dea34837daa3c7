"""What a request's context was made of: the ``context_utilization`` of the response."""

from __future__ import annotations

from typing import Literal, TypedDict

from pydantic import BaseModel, Field, field_serializer

from app.core.redact import redactor
from app.llm.responses import Usage
from app.protocol.goal import ContextGoal
from app.wire.json import JSONObject

__all__ = [
    "ArtifactOutcome",
    "ArtifactOutcomeRecord",
    "CacheStats",
    "ClearedToolResult",
    "ContextBreakdown",
    "ContextPlanningUsage",
    "ContextUtilization",
    "CostInfo",
    "PlannerDecision",
    "PlanningCost",
    "TokenCalibrationStats",
]


class ContextBreakdown(BaseModel):
    """Tokens by part; the parts add up to ``tokens_used``."""

    system: int = 0
    # The tool definitions sent with the request (``tools``), as their JSON counts.
    tools: int = 0
    history: int = 0
    artifacts: int = 0
    memory: int = 0
    current: int = 0
    # The per-request overhead of the chat format (the reply primer), in no message.
    overhead: int = 0

    def total(self) -> int:
        return (
            self.system
            + self.tools
            + self.history
            + self.artifacts
            + self.memory
            + self.current
            + self.overhead
        )


class ArtifactOutcome(BaseModel):
    artifact_id: str
    source: str
    artifact_type: Literal["tool_result", "document"]
    strategy: Literal["include_full", "summarize", "rag_extract", "exclude"]
    original_size_chars: int
    processed_size_chars: int
    cache_hit: bool = False
    # Decided on an earlier call and sent as it was then (the prompt owner keeps decisions
    # until a rebase), or sent as stored history: listed so the ledger covers the prompt.
    carried: bool = False
    # The document's title or the tool's name, for people reading the report (not in the contract).
    title: str | None = None


class ArtifactOutcomeRecord(TypedDict):
    """An ``ArtifactOutcome`` as JSON (``model_dump(mode="json")``): how the prompt owner's
    ledger keeps the outcomes of the artifacts in its prompt (app/turns/owner.py)."""

    artifact_id: str
    source: str
    artifact_type: Literal["tool_result", "document"]
    strategy: Literal["include_full", "summarize", "rag_extract", "exclude"]
    original_size_chars: int
    processed_size_chars: int
    cache_hit: bool
    carried: bool
    title: str | None


class PlanningCost(BaseModel):
    planner_cost: float = 0.0
    summarizer_cost: float = 0.0
    total_cost: float = 0.0


class ContextPlanningUsage(BaseModel):
    """Tokens of the planner and summarizer calls made for this request (beside their cost)."""

    planner_calls: int = 0
    planner_prompt_tokens: int = 0
    planner_completion_tokens: int = 0
    summarizer_calls: int = 0
    summarizer_prompt_tokens: int = 0
    summarizer_completion_tokens: int = 0
    total_tokens: int = 0

    def add_planner(self, usage: Usage | None) -> None:
        self.planner_calls += 1
        if usage is not None:
            self.planner_prompt_tokens += usage.prompt_tokens
            self.planner_completion_tokens += usage.completion_tokens
            self.total_tokens += usage.prompt_tokens + usage.completion_tokens

    def add_summarizer(self, usage: Usage | None) -> None:
        self.summarizer_calls += 1
        if usage is not None:
            self.summarizer_prompt_tokens += usage.prompt_tokens
            self.summarizer_completion_tokens += usage.completion_tokens
            self.total_tokens += usage.prompt_tokens + usage.completion_tokens

    def merge(self, other: ContextPlanningUsage) -> None:
        for name in ContextPlanningUsage.model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class ClearedToolResult(BaseModel):
    sequence_number: int
    tool_call_id: str
    tool_name: str
    tokens: int


class CacheStats(BaseModel):
    # Summary cache of the context engine.
    hits: int = 0
    misses: int = 0
    # Cache-aware fit: did this prompt keep the previous one's system + history as its prefix
    # (no cut, no new clearing), and how many tokens that stable prefix holds.
    prefix_kept: bool = False
    prefix_tokens: int = 0
    # The provider's prompt cache, as it reported (OpenAI cached_tokens, Anthropic
    # cache_read_input_tokens / cache_creation_input_tokens and its 1-hour part, Gemini
    # cached_content_token_count), beside prefix_tokens (contextgate's own estimate of the
    # prefix the provider can read back); and what the reads and writes cost (USD, parts of
    # the response's cost.prompt_cost).
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    cache_read_cost: float = 0.0
    cache_write_cost: float = 0.0
    # Where the history starts (message sequence number) and whether this request moved it.
    cut: bool = False
    cut_at_sequence: int | None = None
    messages_dropped: int = 0
    # Tool results sent as placeholders in this prompt, the tokens that saves, and the batch
    # this request cleared (empty unless it rebased).
    cleared_tool_results: int = 0
    cleared_tokens: int = 0
    cleared_now: list[ClearedToolResult] = Field(default_factory=list)
    # The prompt owner (app/turns/owner.py): whether this call rewrote the prompt, and why;
    # the epoch counts rebases (the prompt is append-only within one).
    rebased: bool = False
    rebase_reason: str | None = None
    prompt_epoch: int = 0


class TokenCalibrationStats(BaseModel):
    """The provider's tokens per contextgate token for this model, learned from usage."""

    ratio: float = 1.0
    samples: int = 0
    # The budget in the provider's tokens; ``max_input_tokens`` is it in contextgate's count.
    provider_max_input_tokens: int = 0


class PlannerDecision(BaseModel):
    """Why the artifacts were decided as they were: the planner model's plan, or the rule
    that chose the deterministic plan."""

    planner: Literal["llm", "deterministic"]
    reason: str  # the planning rule that fired (app/context/decision.py)
    model: str | None = None  # the planner model, when it was asked
    reasoning: str = ""  # the plan's own reasoning
    # Each ArtifactDecision as JSON, its defaults left out: artifact_id, strategy, …
    decisions: list[JSONObject] = Field(default_factory=list)
    cost: float = 0.0


class ContextUtilization(BaseModel):
    model_name: str
    strategy: str = "simple"
    max_input_tokens: int = 0
    tokens_used: int = 0
    messages_included: int = 0
    messages_excluded: int = 0
    breakdown: ContextBreakdown = Field(default_factory=ContextBreakdown)
    artifacts_processed: list[ArtifactOutcome] = Field(default_factory=list)
    llm_planning_used: bool = False
    # None when the request had no artifacts to decide about.
    planner_decision: PlannerDecision | None = None
    planning_cost: PlanningCost = Field(default_factory=PlanningCost)
    planning_usage: ContextPlanningUsage = Field(default_factory=ContextPlanningUsage)
    goal: ContextGoal | None = None
    cache_stats: CacheStats = Field(default_factory=CacheStats)
    # The reports of their own packages, passed along as they made them: compaction's
    # (app/compaction ``CompactionReport.as_dict``) and the memories' (app/memories).
    compaction: JSONObject | None = None
    memories_injected: list[JSONObject] = Field(default_factory=list)
    # ids of memories the model saved with the ``remember`` tool (llm_triggered extraction)
    memories_remembered: list[str] = Field(default_factory=list)
    # Stored messages brought back by message recall: sequence_number, turn_number,
    # conversation_id, similarity (app/recall/search.py).
    messages_recalled: list[JSONObject] = Field(default_factory=list)
    # Why something fell back (planner failed, cache unreachable, …); empty when all went well.
    notes: list[str] = Field(default_factory=list)
    calibration: TokenCalibrationStats = Field(default_factory=TokenCalibrationStats)
    # The provider's extended thinking was switched off for this call (a last resort: the
    # current loop's reasoning could not be resent), with the reason.
    thinking_disabled: str | None = None

    @field_serializer("notes", "compaction")
    def _redacted(self, value: list[str] | JSONObject | None) -> object:
        # Notes quote failures (planner, summarizer, embeddings): never a secret in them.
        return redactor.value(value)


class CostInfo(BaseModel):
    """A response's cost in USD. ``prompt_cost`` includes the provider's prompt cache, priced at
    its rates: ``cache_read_cost`` and ``cache_write_cost`` are the parts of it spent on cache
    reads and writes (not added again to ``total_cost``)."""

    prompt_cost: float = 0.0
    completion_cost: float = 0.0
    planning_cost: float = 0.0
    total_cost: float = 0.0
    cache_read_cost: float = 0.0
    cache_write_cost: float = 0.0

    @classmethod
    def of(
        cls,
        prompt: float,
        completion: float,
        planning: float,
        *,
        cache_read: float = 0.0,
        cache_write: float = 0.0,
    ) -> CostInfo:
        return cls(
            prompt_cost=prompt,
            completion_cost=completion,
            planning_cost=planning,
            total_cost=prompt + completion + planning,
            cache_read_cost=cache_read,
            cache_write_cost=cache_write,
        )
