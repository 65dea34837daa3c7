"""The chat answer as Anthropic's: content blocks (thinking first, then text, then
``tool_use``), the finish reason a ``stop_reason``, the usage Anthropic's usage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import orjson

from app.llm.pricing import prompt_cache
from app.messages.types import ThinkingFields
from app.wire.anthropic import AnthropicUsage, ContentBlock
from app.wire.anthropic import RedactedThinkingBlock as RedactedThinkingOut
from app.wire.anthropic import ThinkingBlock as ThinkingOut
from app.wire.chat import ChatMessage
from app.wire.json import JSONObject

__all__ = [
    "STOP_REASONS",
    "anthropic_content",
    "anthropic_usage",
    "message_id",
    "stop_reason",
    "text_of",
    "thinking_content",
    "tool_input",
]

STOP_REASONS = {
    "stop": "end_turn",
    "end_turn": "end_turn",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "tool_use": "tool_use",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}


def message_id(request_id: str) -> str:
    """``msg_…`` from our request id (``req_…``): one id per answer, findable in the log."""
    return "msg_" + request_id.removeprefix("req_")


def tool_input(arguments: str | JSONObject | None) -> JSONObject:
    """A tool call's arguments as Anthropic's ``input`` object."""
    if isinstance(arguments, dict):
        return arguments
    if not arguments:
        return {}
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"_raw_arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def thinking_content(message: ChatMessage) -> list[ContentBlock]:
    """Thinking blocks exactly as the provider gave them; a non-Anthropic reasoner's text as
    one unsigned thinking block."""
    blocks: list[ContentBlock] = []
    for block in message.get("thinking_blocks") or []:
        fields = cast(ThinkingFields, block)  # as the provider sent it
        if fields.get("type") == "redacted_thinking":
            blocks.append(
                RedactedThinkingOut(type="redacted_thinking", data=fields.get("data") or "")
            )
        elif fields.get("type") == "thinking":
            blocks.append(
                ThinkingOut(
                    type="thinking",
                    thinking=fields.get("thinking") or "",
                    signature=fields.get("signature") or "",
                )
            )
    if not blocks and message.get("reasoning_content"):
        blocks.append(
            {"type": "thinking", "thinking": message["reasoning_content"], "signature": ""}
        )
    return blocks


def text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def anthropic_content(message: ChatMessage) -> list[ContentBlock]:
    blocks = thinking_content(message)
    text = text_of(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": function.get("name") or "",
                "input": tool_input(function.get("arguments")),
            }
        )
    return blocks


def stop_reason(finish_reason: str | None, *, has_tool_calls: bool = False) -> str:
    if has_tool_calls and finish_reason in (None, "stop", "tool_calls"):
        return "tool_use"
    return STOP_REASONS.get(finish_reason or "stop", "end_turn")


def anthropic_usage(raw: Mapping[str, object] | None) -> AnthropicUsage:
    """Anthropic counts cache reads and writes apart from ``input_tokens`` (the chat usage
    litellm gives includes them in ``prompt_tokens``), and splits the writes by lifetime."""
    raw = raw or {}
    cache = prompt_cache(raw)
    return {
        "input_tokens": cache.uncached_tokens,
        "output_tokens": int(cast("int | None", raw.get("completion_tokens")) or 0),
        "cache_read_input_tokens": cache.read_tokens,
        "cache_creation_input_tokens": cache.write_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": cache.write_5m_tokens,
            "ephemeral_1h_input_tokens": cache.write_1h_tokens,
        },
    }
