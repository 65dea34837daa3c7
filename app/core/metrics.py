"""Prometheus metrics: the metric objects and small ``record_*`` functions others call.

One process: the default registry. Several workers (``contextgate serve --workers N``): the CLI
points ``PROMETHEUS_MULTIPROC_DIR`` at an empty directory before the workers start, every worker
writes its samples there, and ``/metrics`` aggregates them (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client import multiprocess as _multiprocess

from app.core.redact import redact

# No *_created series: half the text, nothing a dashboard needs.
disable_created_metrics()  # type: ignore[no-untyped-call]

__all__ = [
    "CONTENT_TYPE_LATEST",
    "MULTIPROC_ENV",
    "ChatFigures",
    "record_chat",
    "record_http",
    "record_upstream",
    "render",
]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

HTTP_REQUESTS = Counter(
    "contextgate_http_requests",
    "HTTP requests served, by method, route template and status.",
    ["method", "route", "status"],
)
HTTP_LATENCY = Histogram(
    "contextgate_http_request_duration_seconds",
    "Time from request to the last byte of the response (whole stream for SSE).",
    ["method", "route", "status"],
    buckets=_LATENCY_BUCKETS,
)
UPSTREAM_LATENCY = Histogram(
    "contextgate_upstream_latency_seconds",
    "One upstream call (one attempt): whole answer, or time to the first chunk for streams.",
    ["model", "outcome"],
    buckets=_LATENCY_BUCKETS,
)
TOKENS = Counter(
    "contextgate_tokens",
    "Tokens reported by the upstream for chat requests, by direction (prompt, completion).",
    ["model", "direction"],
)
TOKENS_SAVED = Counter(
    "contextgate_context_tokens_saved",
    "Tokens context management kept out of requests: stored history left out, compaction, "
    "and artifacts summarized, extracted or excluded (chars / 4).",
    ["model"],
)
CHAT_REQUESTS = Counter(
    "contextgate_chat_requests",
    "Chat completions recorded, by model, context strategy and outcome status.",
    ["model", "strategy", "status"],
)
PLANNER_CALLS = Counter(
    "contextgate_planner_calls",
    "Requests whose artifacts were planned by the LLM planner.",
    ["model"],
)
PLANNER_FALLBACKS = Counter(
    "contextgate_planner_fallbacks",
    "Requests whose planner failed and fell back to the deterministic path.",
    ["model"],
)
DEGRADED = Counter(
    "contextgate_context_degraded",
    "Requests where a context step fell back (planner, cache, memory: context_utilization.notes).",
    ["model"],
)
SUMMARY_CACHE = Counter(
    "contextgate_summary_cache",
    "Summary cache lookups, by result (hit, miss).",
    ["result"],
)
for _result in ("hit", "miss"):
    SUMMARY_CACHE.labels(_result).inc(0)
COMPACTIONS = Counter(
    "contextgate_compactions",
    "Conversation compactions performed.",
    ["model"],
)
ARTIFACTS = Counter(
    "contextgate_artifacts",
    "Artifacts processed, by strategy (include_full, summarize, rag_extract, exclude).",
    ["strategy"],
)
PROMPT_REBASES = Counter(
    "contextgate_prompt_rebases",
    "Prompts rewritten by the prompt owner (the rest kept the previous prompt as their prefix).",
    ["model"],
)
THINKING_DISABLED = Counter(
    "contextgate_thinking_disabled",
    "Calls on which the client's extended thinking had to be switched off (a last resort).",
    ["model"],
)
COST = Counter(
    "contextgate_cost_usd",
    "Cost in USD, by model and kind (prompt, completion, planning).",
    ["model", "kind"],
)
PROMPT_CACHE_TOKENS = Counter(
    "contextgate_prompt_cache_tokens",
    "Prompt tokens the provider's prompt cache served or stored, as it reported them, by model "
    'and kind (read, write_5m, write_1h); part of contextgate_tokens{direction="prompt"}.',
    ["model", "kind"],
)
PROMPT_CACHE_COST = Counter(
    "contextgate_prompt_cache_cost_usd",
    "USD of the provider's prompt-cache reads and writes at their own rates, by model and kind "
    '(read, write); part of contextgate_cost_usd{kind="prompt"}.',
    ["model", "kind"],
)


# Model names come from clients: past this many distinct names per process, the rest are
# counted as "other" so that a client cannot grow the label space (and memory) without end.
MAX_MODEL_LABELS = 200
_models: set[str] = set()


def model_label(name: str) -> str:
    if name in _models:
        return name
    if redact(name) != name:  # a key pasted as a model name never becomes a label
        return "other"
    if len(_models) < MAX_MODEL_LABELS and len(name) <= 200:
        _models.add(name)
        return name
    return "other"


# The labelled child of each (metric, label values) once made: prometheus_client's ``labels``
# checks and converts the values and takes a lock on every call, a dozen times per chat
# request. The label values are bounded (model_label, route templates, fixed kinds).
_children: dict[tuple[object, ...], Any] = {}


def _child(metric: Counter | Histogram, *values: str) -> Any:
    """``metric.labels(*values)``, made once."""
    key = (metric, *values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


def record_http(method: str, route: str, status: int, seconds: float) -> None:
    labels = (method if method in _METHODS else "OTHER", route, str(status))
    _child(HTTP_REQUESTS, *labels).inc()
    _child(HTTP_LATENCY, *labels).observe(seconds)


def record_upstream(model: str, outcome: str, seconds: float) -> None:
    _child(UPSTREAM_LATENCY, model_label(model), outcome).observe(seconds)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _Breakdown(Protocol):
    @property
    def system(self) -> int: ...
    @property
    def history(self) -> int: ...
    @property
    def current(self) -> int: ...


class _Artifact(Protocol):
    @property
    def carried(self) -> bool: ...
    @property
    def strategy(self) -> str: ...
    @property
    def original_size_chars(self) -> int: ...
    @property
    def processed_size_chars(self) -> int: ...


class CacheFigures(Protocol):
    """What the metrics read of a ``CacheStats`` (app/context/metadata.py)."""

    @property
    def hits(self) -> int: ...
    @property
    def misses(self) -> int: ...
    @property
    def rebased(self) -> bool: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def cache_write_tokens(self) -> int: ...
    @property
    def cache_write_1h_tokens(self) -> int: ...
    @property
    def cache_read_cost(self) -> float: ...
    @property
    def cache_write_cost(self) -> float: ...


class Utilization(Protocol):
    """What the metrics read of a ``ContextUtilization`` (app/context/metadata.py, a layer
    above this one)."""

    @property
    def model_name(self) -> str: ...
    @property
    def strategy(self) -> str: ...
    @property
    def breakdown(self) -> _Breakdown: ...
    @property
    def artifacts_processed(self) -> Sequence[_Artifact]: ...
    @property
    def compaction(self) -> Mapping[str, object] | None: ...
    @property
    def cache_stats(self) -> CacheFigures: ...
    @property
    def thinking_disabled(self) -> str | None: ...
    @property
    def llm_planning_used(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class ChatFigures:
    """One chat request's tokens and costs (USD). ``full_context_tokens``: what the whole
    stored conversation plus the new messages would have needed without context management."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_cost: float = 0.0
    completion_cost: float = 0.0
    planning_cost: float = 0.0
    full_context_tokens: int = 0
    # The notes when the request was recorded (a door may add its own later: not fallbacks).
    notes: tuple[str, ...] = ()


def record_chat(utilization: Utilization, status: str, figures: ChatFigures) -> None:
    """Everything one recorded chat request tells: tokens, savings, planning, cache, cost
    (``utilization`` is a ``ContextUtilization``)."""
    prompt_tokens, completion_tokens = figures.prompt_tokens, figures.completion_tokens
    full_context_tokens = figures.full_context_tokens
    model = model_label(str(utilization.model_name))
    _child(CHAT_REQUESTS, model, str(utilization.strategy), status).inc()
    _child(TOKENS, model, "prompt").inc(max(prompt_tokens, 0))
    _child(TOKENS, model, "completion").inc(max(completion_tokens, 0))
    parts = utilization.breakdown
    saved = max(full_context_tokens - (parts.system + parts.history + parts.current), 0)
    chars_saved = 0
    for artifact in utilization.artifacts_processed:
        if artifact.carried:  # decided on an earlier call, counted then
            continue
        _child(ARTIFACTS, str(artifact.strategy)).inc()
        chars_saved += max(artifact.original_size_chars - artifact.processed_size_chars, 0)
    compaction = utilization.compaction or {}
    compacted = max(_int(compaction.get("tokens_before")) - _int(compaction.get("tokens_after")), 0)
    _child(TOKENS_SAVED, model).inc(saved + chars_saved // 4 + compacted)
    if utilization.cache_stats.rebased:
        _child(PROMPT_REBASES, model).inc()
    if utilization.thinking_disabled:
        _child(THINKING_DISABLED, model).inc()
    if utilization.llm_planning_used:
        _child(PLANNER_CALLS, model).inc()
    notes = [str(note).lower() for note in figures.notes]
    if notes:
        _child(DEGRADED, model).inc()
    if any("plan" in note for note in notes):
        _child(PLANNER_FALLBACKS, model).inc()
    if utilization.cache_stats.hits:
        _child(SUMMARY_CACHE, "hit").inc(utilization.cache_stats.hits)
    if utilization.cache_stats.misses:
        _child(SUMMARY_CACHE, "miss").inc(utilization.cache_stats.misses)
    if utilization.compaction:
        _child(COMPACTIONS, model).inc()
    _child(COST, model, "prompt").inc(max(figures.prompt_cost, 0.0))
    _child(COST, model, "completion").inc(max(figures.completion_cost, 0.0))
    _child(COST, model, "planning").inc(max(figures.planning_cost, 0.0))
    _record_prompt_cache(model, utilization.cache_stats)


def _record_prompt_cache(model: str, stats: CacheFigures) -> None:
    """The provider's prompt cache of one response (``cache_stats``: a ``CacheStats``)."""
    one_hour = max(_int(stats.cache_write_1h_tokens), 0)
    tokens = {
        "read": _int(stats.cached_tokens),
        "write_5m": max(_int(stats.cache_write_tokens) - one_hour, 0),
        "write_1h": one_hour,
    }
    for kind, count in tokens.items():
        if count > 0:
            _child(PROMPT_CACHE_TOKENS, model, kind).inc(count)
    for kind, usd in (("read", stats.cache_read_cost), ("write", stats.cache_write_cost)):
        if usd > 0:
            _child(PROMPT_CACHE_COST, model, kind).inc(usd)


def record_embeddings(model: str, tokens: int, cost: float) -> None:
    """A ``POST /v1/embeddings`` call: its input tokens and cost, beside chat's."""
    label = model_label(model)
    _child(TOKENS, label, "prompt").inc(max(tokens, 0))
    _child(COST, label, "prompt").inc(max(cost, 0.0))


def render() -> bytes:
    """The exposition text: this process's registry, or every worker's in multiprocess mode."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest(REGISTRY)
