"""A chat answer as Responses output items, and the pieces both directions share.

Thinking blocks travel inside the reasoning item's ``encrypted_content`` (contextgate's own
``cg1:`` envelope) and come back byte-for-byte; ids are OpenAI's prefixes.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Mapping, Sequence
from typing import cast

import orjson

from app.llm.pricing import prompt_cache
from app.llm.responses import Usage
from app.wire.chat import ChatMessage, ThinkingBlockParam, ToolCall
from app.wire.responses import (
    FunctionCallItem,
    ItemStatus,
    MessageItem,
    OutputItem,
    OutputTextPart,
    ReasoningItem,
    ResponsesUsage,
)

__all__ = [
    "decode_reasoning",
    "encode_reasoning",
    "function_call_item",
    "item_id",
    "message_item",
    "output_items",
    "reasoning_item",
    "response_usage",
]

_REASONING_PREFIX = "cg1:"


def item_id(prefix: str) -> str:
    """Ids of output items and responses: ``msg_…``, ``fc_…``, ``rs_…``, ``resp_…``."""
    return f"{prefix}_{secrets.token_hex(16)}"


# ---- reasoning: thinking blocks ride in encrypted_content -------------------------------


def encode_reasoning(thinking_blocks: Sequence[ThinkingBlockParam]) -> str:
    payload = orjson.dumps({"thinking_blocks": thinking_blocks})
    return _REASONING_PREFIX + base64.urlsafe_b64encode(payload).decode()


def decode_reasoning(encrypted: str | None) -> list[ThinkingBlockParam] | None:
    """The thinking blocks of a reasoning item contextgate produced; None for anyone else's."""
    if not encrypted or not encrypted.startswith(_REASONING_PREFIX):
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(encrypted[len(_REASONING_PREFIX) :]))
    except (binascii.Error, ValueError):
        return None
    blocks = data.get("thinking_blocks") if isinstance(data, dict) else None
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        return None
    return cast(list[ThinkingBlockParam], blocks)  # as encode_reasoning wrote them


# ---- answer: chat message → output items ---------------------------------------------------


def reasoning_item(
    item: str, reasoning: str | None, thinking_blocks: Sequence[ThinkingBlockParam] | None
) -> ReasoningItem:
    blocks: Sequence[Mapping[str, object]] = thinking_blocks or ()
    text = reasoning or "".join(str(b.get("thinking") or "") for b in blocks)
    data: ReasoningItem = {
        "id": item,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
    }
    if thinking_blocks:
        data["encrypted_content"] = encode_reasoning(thinking_blocks)
    return data


def message_item(item: str, text: str, status: ItemStatus = "completed") -> MessageItem:
    part: OutputTextPart = {"type": "output_text", "text": text, "annotations": []}
    return {"id": item, "type": "message", "role": "assistant", "status": status, "content": [part]}


def function_call_item(
    item: str, call: ToolCall, status: ItemStatus = "completed"
) -> FunctionCallItem:
    function: Mapping[str, object] = call.get("function") or {}
    return {
        "id": item,
        "type": "function_call",
        "status": status,
        "call_id": str(call.get("id") or item),
        "name": str(function.get("name") or ""),
        "arguments": str(function.get("arguments") or ""),
    }


def output_items(message: ChatMessage) -> list[OutputItem]:
    """An assistant chat message as output items: reasoning, message, function calls."""
    items: list[OutputItem] = []
    if message.get("reasoning_content") or message.get("thinking_blocks"):
        items.append(
            reasoning_item(
                item_id("rs"), message.get("reasoning_content"), message.get("thinking_blocks")
            )
        )
    content = message.get("content")
    if isinstance(content, list):
        parts: list[Mapping[str, object]] = list(content)
        content = "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))
    if content:
        items.append(message_item(item_id("msg"), content))
    for call in message.get("tool_calls") or ():
        items.append(function_call_item(item_id("fc"), call))
    return items


def response_usage(usage: Usage | None) -> ResponsesUsage:
    raw: Mapping[str, object] = usage.raw if usage else {}
    prompt = usage.prompt_tokens if usage else 0
    completion = usage.completion_tokens if usage else 0
    cache = prompt_cache(raw)
    details = raw.get("completion_tokens_details") or {}
    completion_details = cast("Mapping[str, int | None]", details)  # OpenAI's counts
    return {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": cache.read_tokens,
            "cache_write_tokens": cache.write_tokens,
        },
        "output_tokens": completion,
        "output_tokens_details": {
            "reasoning_tokens": int(completion_details.get("reasoning_tokens") or 0)
        },
        "total_tokens": prompt + completion,
    }
