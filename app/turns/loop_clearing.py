"""A rebase inside a tool loop: the loop's oldest tool results become placeholders.

A coding agent's task is one user turn of dozens of tool calls, so when its prompt passes the
high-water mark there is no older history to cut: what can go is the loop's own old tool
results. They are cleared to the same placeholders the cache-aware fit writes for older turns
(the full result stays stored, and recall brings it back when a question needs it), oldest
first, until the loop fits its target; the newest ``keep_tool_results`` (this call's new
results count among them, and are never cleared) and the operator's excluded tools stay raw,
and the loop's assistant messages (their thinking and signatures) are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.context.cache_fit import ClearedResult, placeholder_text
from app.context.cache_policy import CachePolicy
from app.conversations.messages import ConversationMessage
from app.wire.chat import ChatMessage

__all__ = ["LoopClearing", "clear_loop_results"]


@dataclass(slots=True)
class LoopClearing:
    messages: list[ConversationMessage]
    cleared: list[ClearedResult] = field(default_factory=list)
    saved_tokens: int = 0


def _tool_names(messages: list[ConversationMessage]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in message.tool_calls or []:
            function = call.get("function") or {}
            names[str(call.get("id"))] = str(function.get("name") or "tool")
    return names


def clear_loop_results(
    current: list[ConversationMessage],
    *,
    target: int,
    policy: CachePolicy,
    count: Callable[[ChatMessage], int],
) -> LoopClearing:
    """``current`` with its oldest clearable tool results as placeholders, until its tokens are
    at most ``target`` (or nothing more may be cleared)."""
    total = sum(m.token_count for m in current)
    result = LoopClearing(list(current))
    if total <= target:
        return result
    names = _tool_names(current)
    results = [
        index
        for index, m in enumerate(current)
        if m.role == "tool"
        and names.get(str(m.tool_call_id), m.name or "tool") not in policy.exclude_tools
    ]
    # The newest ``keep_tool_results`` stay raw, this call's new ones among them (as Anthropic's
    # ``clear_tool_uses`` keeps the most recent tool uses, the latest included).
    keep = max(1, policy.keep_tool_results)
    for index in results[:-keep]:
        if total <= target:
            break
        message = current[index]
        if not message.stored:
            continue  # this call's results reach the model at least once, raw
        name = names.get(str(message.tool_call_id), message.name or "tool")
        text = placeholder_text(name, str(message.tool_call_id), message.token_count)
        tokens = count({"role": "tool", "content": text, "tool_call_id": message.tool_call_id})
        if message.token_count <= 2 * tokens:
            continue  # clearing would save nothing worth a placeholder
        result.messages[index] = message.model_copy(update={"content": text, "token_count": tokens})
        saved = message.token_count - tokens
        total -= saved
        result.saved_tokens += saved
        result.cleared.append(
            ClearedResult(
                message.sequence_number, str(message.tool_call_id), name, message.token_count
            )
        )
    return result
