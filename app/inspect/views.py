"""What the CLI and the inspector page show: plain dataclasses built from stored rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from app.db.models import Conversation, Message, RequestLog
from app.inspect.stored import (
    StoredArtifact,
    StoredCacheStats,
    StoredClearedResult,
    StoredPlannerDecision,
    StoredUtilization,
)
from app.tokens.counter import text_of
from app.wire.json import JSONObject

__all__ = [
    "PARTS",
    "ConversationRow",
    "MessageView",
    "Part",
    "ProviderCacheView",
    "RequestView",
    "TimelineEntry",
    "conversation_row",
    "message_view",
    "request_view",
    "scale_bars",
]

PARTS = ("system", "tools", "history", "artifacts", "memory", "current", "overhead")


@dataclass(slots=True)
class ConversationRow:
    id: str
    tenant_id: str
    title: str | None
    model: str | None
    message_count: int
    total_tokens: int
    requests: int
    cost: float
    created_at: datetime
    updated_at: datetime


@dataclass(slots=True)
class Part:
    name: str
    tokens: int
    percent: float  # share of what this request sent


@dataclass(slots=True)
class ToolCallView:
    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class MessageView:
    sequence_number: int
    turn_number: int
    role: str
    text: str
    token_count: int
    status: str
    request_id: str | None
    tool_call_id: str | None = None
    tool_calls: list[ToolCallView] = field(default_factory=list)
    reasoning: str | None = None

    @property
    def kind(self) -> str:
        if self.role == "tool":
            return "tool-result"
        if self.tool_calls:
            return "tool-call"
        return self.role


@dataclass(slots=True)
class RequestView:
    id: str
    created_at: datetime
    model: str
    status: str
    status_code: int
    stream: bool
    prompt_tokens: int
    completion_tokens: int
    prompt_cost: float
    completion_cost: float
    planning_cost: float
    total_cost: float
    latency_ms: float
    error: str | None
    strategy: str
    max_input_tokens: int
    tokens_used: int
    messages_included: int
    messages_excluded: int
    parts: list[Part]
    artifacts: list[StoredArtifact]
    llm_planning_used: bool
    cache_hits: int
    cache_misses: int
    prompt_cache: PromptCacheView | None
    provider_cache: ProviderCacheView | None
    compaction: JSONObject | None
    memories_injected: list[JSONObject]
    notes: list[str]
    # Extended thinking switched off for this call (a last resort), and why.
    thinking_disabled: str | None = None
    # The planner's decision (planner, reason, model, reasoning, decisions, cost), if any.
    planner_decision: StoredPlannerDecision | None = None
    # Width of this request's bar relative to the largest request of its conversation.
    bar_percent: float = 100.0

    @property
    def sent_tokens(self) -> int:
        return sum(part.tokens for part in self.parts)

    @property
    def budget_percent(self) -> float:
        """How full the input budget was."""
        if not self.max_input_tokens:
            return 0.0
        return round(100.0 * self.tokens_used / self.max_input_tokens, 1)

    @property
    def fates(self) -> dict[str, int]:
        """How many artifacts were included, summarized, extracted, excluded."""
        counts: dict[str, int] = {}
        for artifact in self.artifacts:
            strategy = str(artifact.get("strategy", "?"))
            counts[strategy] = counts.get(strategy, 0) + 1
        return counts


@dataclass(slots=True)
class PromptCacheView:
    """The cache-aware fit of one request: where the prompt was cut and what was cleared."""

    prefix_kept: bool
    prefix_tokens: int
    cut: bool
    cut_at_sequence: int | None
    messages_dropped: int
    cleared_tool_results: int
    cleared_tokens: int
    cleared_now: list[StoredClearedResult]
    rebase_reason: str | None = None  # the prompt owner rewrote the prompt, and why


@dataclass(slots=True)
class ProviderCacheView:
    """The provider's prompt cache on one request, as it reported and as it was priced."""

    read_tokens: int
    write_tokens: int
    write_1h_tokens: int
    read_cost: float
    write_cost: float
    expected_tokens: int | None  # contextgate's estimate: the prefix it kept, if it kept one

    @property
    def write_5m_tokens(self) -> int:
        return self.write_tokens - self.write_1h_tokens


def provider_cache_view(cache: StoredCacheStats) -> ProviderCacheView | None:
    read, write = _int(cache.get("cached_tokens")), _int(cache.get("cache_write_tokens"))
    if not read and not write:
        return None
    kept = bool(cache.get("prefix_kept"))
    return ProviderCacheView(
        read_tokens=read,
        write_tokens=write,
        write_1h_tokens=min(_int(cache.get("cache_write_1h_tokens")), write),
        read_cost=_float(cache.get("cache_read_cost")),
        write_cost=_float(cache.get("cache_write_cost")),
        expected_tokens=_int(cache.get("prefix_tokens")) if kept else None,
    )


def prompt_cache_view(cache: StoredCacheStats) -> PromptCacheView | None:
    if "prefix_kept" not in cache:  # logged before the cache-aware fit, or with it off
        return None
    cut_at = cache.get("cut_at_sequence")
    return PromptCacheView(
        prefix_kept=bool(cache.get("prefix_kept")),
        prefix_tokens=_int(cache.get("prefix_tokens")),
        cut=bool(cache.get("cut")),
        cut_at_sequence=cut_at if isinstance(cut_at, int) else None,
        messages_dropped=_int(cache.get("messages_dropped")),
        cleared_tool_results=_int(cache.get("cleared_tool_results")),
        cleared_tokens=_int(cache.get("cleared_tokens")),
        cleared_now=[c for c in cache.get("cleared_now") or [] if isinstance(c, dict)],
        rebase_reason=str(cache["rebase_reason"]) if cache.get("rebase_reason") else None,
    )


@dataclass(slots=True)
class TimelineEntry:
    """The messages one request stored, then that request (None: messages without a log)."""

    messages: list[MessageView]
    request: RequestView | None


def conversation_row(conversation: Conversation, requests: int, cost: float) -> ConversationRow:
    return ConversationRow(
        id=conversation.id,
        tenant_id=conversation.tenant_id,
        title=conversation.title,
        model=conversation.model,
        message_count=conversation.message_count,
        total_tokens=conversation.total_tokens,
        requests=requests,
        cost=cost,
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
    )


def _tool_calls(raw: Sequence[Mapping[str, object]] | None) -> list[ToolCallView]:
    calls = []
    for call in raw or []:
        function = cast("Mapping[str, object]", call.get("function") or {})
        calls.append(
            ToolCallView(
                id=str(call.get("id", "")),
                name=str(function.get("name", "?")),
                arguments=str(function.get("arguments", "")),
            )
        )
    return calls


def message_view(row: Message) -> MessageView:
    return MessageView(
        sequence_number=row.sequence_number,
        turn_number=row.turn_number,
        role=row.role,
        text=text_of(row.content),
        token_count=row.token_count,
        status=row.status,
        request_id=row.request_id,
        tool_call_id=row.tool_call_id,
        tool_calls=_tool_calls(row.tool_calls),
        reasoning=row.reasoning_content or _thinking_text(row.thinking_blocks),
    )


def _thinking_text(blocks: Sequence[Mapping[str, object]] | None) -> str | None:
    """Anthropic's thinking blocks as the inspector shows them (the signature is not text)."""
    parts = [
        str(block.get("thinking") or "")
        if block.get("type") == "thinking"
        else "[redacted thinking]"
        for block in blocks or ()
    ]
    return "\n\n".join(part for part in parts if part) or None


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _parts(utilization: StoredUtilization) -> list[Part]:
    breakdown: Mapping[str, object] = utilization.get("breakdown") or {}
    tokens = {name: _int(breakdown.get(name)) for name in PARTS}
    scale = max(sum(tokens.values()), 1)
    return [Part(name, tokens[name], round(100.0 * tokens[name] / scale, 2)) for name in PARTS]


def request_view(row: RequestLog) -> RequestView:
    utilization = cast(StoredUtilization, row.context_utilization or {})  # stored JSON
    cache: StoredCacheStats = utilization.get("cache_stats") or {}
    artifacts = utilization.get("artifacts_processed") or []
    return RequestView(
        id=row.id,
        created_at=row.created_at,
        model=row.model,
        status=row.status,
        status_code=row.status_code,
        stream=row.stream,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        prompt_cost=row.prompt_cost,
        completion_cost=row.completion_cost,
        planning_cost=row.planning_cost,
        total_cost=row.total_cost,
        latency_ms=row.latency_ms,
        error=row.error,
        strategy=str(utilization.get("strategy", "")),
        max_input_tokens=_int(utilization.get("max_input_tokens")),
        tokens_used=_int(utilization.get("tokens_used")),
        messages_included=_int(utilization.get("messages_included")),
        messages_excluded=_int(utilization.get("messages_excluded")),
        parts=_parts(utilization),
        artifacts=[a for a in artifacts if isinstance(a, dict)],
        llm_planning_used=bool(utilization.get("llm_planning_used")),
        cache_hits=_int(cache.get("hits")),
        cache_misses=_int(cache.get("misses")),
        prompt_cache=prompt_cache_view(cache),
        provider_cache=provider_cache_view(cache),
        compaction=utilization.get("compaction") or None,
        memories_injected=list(utilization.get("memories_injected") or []),
        notes=[str(note) for note in utilization.get("notes") or []],
        thinking_disabled=str(utilization["thinking_disabled"])
        if utilization.get("thinking_disabled")
        else None,
        planner_decision=_planner_decision(utilization, artifacts),
    )


def _planner_decision(
    utilization: StoredUtilization, artifacts: list[StoredArtifact]
) -> StoredPlannerDecision | None:
    """The stored decision, its artifact ids shown by title where the report has one."""
    decision = utilization.get("planner_decision")
    if not isinstance(decision, dict):
        return None
    titles = {a.get("artifact_id"): a.get("title") for a in artifacts if isinstance(a, dict)}
    rows = [d for d in decision.get("decisions") or [] if isinstance(d, dict)]
    for row in rows:
        row["title"] = titles.get(row.get("artifact_id")) or row.get("artifact_id")
    return {**decision, "decisions": rows}


def scale_bars(requests: list[RequestView]) -> None:
    """Bars comparable within a conversation: the largest request spans the full width."""
    largest = max((request.sent_tokens for request in requests), default=0)
    for request in requests:
        request.bar_percent = round(100.0 * request.sent_tokens / largest, 2) if largest else 0.0
