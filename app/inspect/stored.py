"""A request's stored report (``request_logs.context_utilization``) as the inspector reads it.

What ``ContextUtilization.model_dump(mode="json")`` (app/context/metadata.py) writes; rows
logged by older versions lack some keys, so every key may be missing and the views read them
defensively.
"""

from __future__ import annotations

from typing import TypedDict

from app.wire.json import JSONObject

__all__ = [
    "StoredArtifact",
    "StoredCacheStats",
    "StoredClearedResult",
    "StoredPlannerDecision",
    "StoredUtilization",
]


class StoredArtifact(TypedDict, total=False):
    artifact_id: str
    source: str
    artifact_type: str
    strategy: str
    original_size_chars: int
    processed_size_chars: int
    cache_hit: bool
    carried: bool
    title: str | None


class StoredClearedResult(TypedDict):
    sequence_number: int
    tool_call_id: str
    tool_name: str
    tokens: int


class StoredCacheStats(TypedDict, total=False):
    hits: int
    misses: int
    prefix_kept: bool
    prefix_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    cache_read_cost: float
    cache_write_cost: float
    cut: bool
    cut_at_sequence: int | None
    messages_dropped: int
    cleared_tool_results: int
    cleared_tokens: int
    cleared_now: list[StoredClearedResult]
    rebased: bool
    rebase_reason: str | None


class StoredPlannerDecision(TypedDict, total=False):
    planner: str
    reason: str
    model: str | None
    reasoning: str
    decisions: list[JSONObject]  # artifact_id, strategy, … (and the title the view adds)
    cost: float


class StoredUtilization(TypedDict, total=False):
    model_name: str
    strategy: str
    max_input_tokens: int
    tokens_used: int
    messages_included: int
    messages_excluded: int
    breakdown: dict[str, int]  # tokens per part (views.PARTS)
    artifacts_processed: list[StoredArtifact]
    llm_planning_used: bool
    planner_decision: StoredPlannerDecision | None
    cache_stats: StoredCacheStats
    compaction: JSONObject | None  # the compactor's report, shown as it is
    memories_injected: list[JSONObject]  # shown by id
    notes: list[str]
    thinking_disabled: str | None
