"""Provider prompt-cache hints and what the provider reports about its cache.

Anthropic caches only up to ``cache_control`` breakpoints, so for its models contextgate marks
the stable prefix when the client marked nothing: the end of the system prompt, the end of the
history kept since the last cut, and the end of the prompt (the next call, which extends it,
reads that one back). At most 4 breakpoints are allowed; this sets at most 3. OpenAI caches
prefixes automatically and needs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from app.context.metadata import ContextUtilization, CostInfo
from app.llm.pricing import prompt_cache
from app.wire.anthropic import CacheControl
from app.wire.chat import ChatMessage, ContentPart

__all__ = [
    "add_cache_hints",
    "client_marked_cache",
    "is_anthropic_model",
    "provider_cache_cost",
    "provider_cache_usage",
]

EPHEMERAL: CacheControl = {"type": "ephemeral"}


def is_anthropic_model(model: str) -> bool:
    name = model.lower()
    return name.startswith(("anthropic/", "bedrock/anthropic", "vertex_ai/claude")) or (
        "claude" in name
    )


def client_marked_cache(
    messages: Sequence[ChatMessage], tools: Sequence[Mapping[str, object]] | None
) -> bool:
    """Whether the client put any ``cache_control`` itself (then its own are kept as sent)."""
    for message in messages:
        if "cache_control" in message:
            return True
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(part, dict) and "cache_control" in part for part in content
        ):
            return True
    return any(isinstance(tool, dict) and "cache_control" in tool for tool in tools or [])


def _marked(message: ChatMessage) -> ChatMessage | None:
    content = message.get("content")
    if isinstance(content, str) and content:
        parts: list[ContentPart] = [{"type": "text", "text": content, "cache_control": EPHEMERAL}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        parts = [*content[:-1], cast(ContentPart, {**content[-1], "cache_control": EPHEMERAL})]
    else:
        return None  # nothing to mark (e.g. an assistant message with tool calls only)
    return {**message, "content": parts}


def add_cache_hints(messages: list[ChatMessage], system_count: int, prefix_count: int) -> int:
    """Mark breakpoints in place (copies of the marked messages); returns how many were set."""
    wanted = {system_count - 1, prefix_count - 1, len(messages) - 1}
    placed = 0
    done: set[int] = set()
    for index in sorted(i for i in wanted if i >= 0):
        # The nearest message at or before ``index`` that has content to mark.
        for position in range(index, -1, -1):
            marked = _marked(messages[position])
            if marked is not None:
                placed += position not in done
                done.add(position)
                messages[position] = marked
                break
    return placed


def provider_cache_usage(
    utilization: ContextUtilization, usage: Mapping[str, object] | None
) -> None:
    """Copy the provider's cache reads and writes (1-hour ones apart) into ``cache_stats``, read
    as they are priced (app/llm/pricing.py)."""
    if not usage:
        return
    cache = prompt_cache(usage)
    utilization.cache_stats.cached_tokens = cache.read_tokens
    utilization.cache_stats.cache_write_tokens = cache.write_tokens
    utilization.cache_stats.cache_write_1h_tokens = cache.write_1h_tokens


def provider_cache_cost(utilization: ContextUtilization, cost: CostInfo) -> None:
    """What the provider's cache reads and writes cost, beside their tokens in ``cache_stats``."""
    utilization.cache_stats.cache_read_cost = cost.cache_read_cost
    utilization.cache_stats.cache_write_cost = cost.cache_write_cost
