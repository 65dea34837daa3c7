"""``X-Contextgate-*`` response headers: the conversation id and a compact
``context_utilization`` summary, for clients that drop unknown body fields (LangChain,
litellm as a client). Every value is ASCII: numbers, booleans and known words only."""

from __future__ import annotations

from app.context.metadata import ContextUtilization, CostInfo

__all__ = ["HEADER_PREFIX", "context_headers"]

HEADER_PREFIX = "X-Contextgate-"


def context_headers(
    conversation_id: str | None,
    utilization: ContextUtilization,
    cost: CostInfo | None = None,
) -> dict[str, str]:
    """The headers of one answer (``cost`` is None on a stream: it is not known yet)."""
    headers = {
        f"{HEADER_PREFIX}Strategy": utilization.strategy,
        f"{HEADER_PREFIX}Tokens-Used": str(utilization.tokens_used),
        f"{HEADER_PREFIX}Max-Input-Tokens": str(utilization.max_input_tokens),
        f"{HEADER_PREFIX}Messages-Included": str(utilization.messages_included),
        f"{HEADER_PREFIX}Messages-Excluded": str(utilization.messages_excluded),
        f"{HEADER_PREFIX}Artifacts": str(len(utilization.artifacts_processed)),
        f"{HEADER_PREFIX}Llm-Planning-Used": str(utilization.llm_planning_used).lower(),
        f"{HEADER_PREFIX}Compacted": str(utilization.compaction is not None).lower(),
        f"{HEADER_PREFIX}Memories-Injected": str(len(utilization.memories_injected)),
        f"{HEADER_PREFIX}Notes": str(len(utilization.notes)),
    }
    stats = utilization.cache_stats
    headers[f"{HEADER_PREFIX}Prompt-Rebased"] = str(stats.rebased).lower()
    headers[f"{HEADER_PREFIX}Prefix-Kept"] = str(stats.prefix_kept).lower()
    if utilization.thinking_disabled:
        # The client asked for extended thinking and this call went without it (last resort).
        headers[f"{HEADER_PREFIX}Thinking"] = "disabled"
    if conversation_id:
        headers["X-Conversation-Id"] = conversation_id
        headers[f"{HEADER_PREFIX}Conversation-Id"] = conversation_id
    if cost is not None:
        headers[f"{HEADER_PREFIX}Cost-Usd"] = f"{cost.total_cost:.8f}"
    return headers
