"""Turn litellm's response objects into OpenAI's exact wire shapes (plain dicts).

This is where an upstream answer becomes typed: litellm's objects (or the direct path's
parsed JSON) are read field by field, and only what the wire shapes name is kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from app.wire.chat import ChatChoice, ChatCompletion, ChatMessage, ChatUsage, ThinkingBlockParam
from app.wire.chat import ToolCall as ChatToolCall
from app.wire.json import JSONObject
from app.wire.stream import ChatChunk, ChunkChoice, Delta, FunctionDelta, ToolCallDelta

__all__ = ["Usage", "normalize_chunk", "normalize_completion", "usage_of"]


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    raw: Mapping[str, object] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """The two counts as chat usage (for a Usage built without the provider's raw one)."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


def usage_of(usage: ChatUsage | None) -> Usage | None:
    if not usage:
        return None
    return Usage(
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        raw=usage,
    )


def _dump(obj: object) -> Any:
    """litellm's object (or a parsed JSON value) as plain JSON: the upstream boundary."""
    if type(obj) is dict:  # the direct paths' parsed JSON: as below, in one check
        return obj
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if dump is not None:
        return dump(exclude_none=True)
    return dict(cast(Iterable[tuple[str, Any]], obj))


def _function(function: JSONObject, *, streaming: bool) -> FunctionDelta:
    fn: FunctionDelta = {}
    if function.get("name"):
        fn["name"] = function["name"]
    if function.get("arguments") is not None:
        fn["arguments"] = function["arguments"]
    elif not streaming:
        fn["arguments"] = ""
    return fn


def _tool_call_deltas(calls: Iterable[object] | None) -> list[ToolCallDelta] | None:
    if not calls:
        return None
    cleaned: list[ToolCallDelta] = []
    for position, call in enumerate(calls):
        data = _dump(call)
        item: ToolCallDelta = {"index": data.get("index", position)}
        if data.get("id"):
            item["id"] = data["id"]
        if data.get("type") or data.get("id"):
            item["type"] = data.get("type") or "function"
        item["function"] = _function(_dump(data.get("function")) or {}, streaming=True)
        cleaned.append(item)
    return cleaned


def _tool_calls(calls: Iterable[object] | None) -> list[ChatToolCall] | None:
    """An answer's tool calls; a call without id or type keeps them left out, as it came."""
    if not calls:
        return None
    cleaned: list[ChatToolCall] = []
    for call in calls:
        data = _dump(call)
        item: JSONObject = {}
        if data.get("id"):
            item["id"] = data["id"]
        if data.get("type") or data.get("id"):
            item["type"] = data.get("type") or "function"
        item["function"] = _function(_dump(data.get("function")) or {}, streaming=False)
        cleaned.append(cast(ChatToolCall, item))
    return cleaned


def _thinking_blocks(blocks: Iterable[object] | None) -> list[ThinkingBlockParam] | None:
    """Thinking / redacted-thinking blocks as plain dicts, their bytes untouched."""
    if not blocks:
        return None
    return [cast(ThinkingBlockParam, dict(_dump(block))) for block in blocks]


def _present(details: JSONObject) -> JSONObject:
    return {key: value for key, value in details.items() if value is not None}


def _clean_usage(usage: object) -> ChatUsage | None:
    data = _dump(usage)
    if not data:
        return None
    cleaned: ChatUsage = {
        "prompt_tokens": int(data.get("prompt_tokens") or 0),
        "completion_tokens": int(data.get("completion_tokens") or 0),
        "total_tokens": int(data.get("total_tokens") or 0),
    }
    if isinstance(data.get("prompt_tokens_details"), dict):
        cleaned["prompt_tokens_details"] = _present(data["prompt_tokens_details"])
    if isinstance(data.get("completion_tokens_details"), dict):
        cleaned["completion_tokens_details"] = _present(data["completion_tokens_details"])
    # Anthropic's prompt cache, as litellm reports it (cache reads are also cached_tokens).
    if isinstance(data.get("cache_read_input_tokens"), int) and data["cache_read_input_tokens"]:
        cleaned["cache_read_input_tokens"] = data["cache_read_input_tokens"]
    writes = data.get("cache_creation_input_tokens")
    if isinstance(writes, int) and writes:
        cleaned["cache_creation_input_tokens"] = writes
    return cleaned


def _message(source: JSONObject) -> ChatMessage:
    message: ChatMessage = {
        "role": source.get("role") or "assistant",
        "content": source.get("content"),
    }
    tool_calls = _tool_calls(source.get("tool_calls"))
    if tool_calls:
        message["tool_calls"] = tool_calls
    if source.get("refusal"):
        message["refusal"] = source["refusal"]
    reasoning = source.get("reasoning_content") or source.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        message["reasoning_content"] = reasoning
    thinking_blocks = _thinking_blocks(source.get("thinking_blocks"))
    if thinking_blocks:
        message["thinking_blocks"] = thinking_blocks
    return message


def normalize_completion(raw: object, model_name: str) -> ChatCompletion:
    """A ``chat.completion`` dict with only OpenAI's fields (plus reasoning_content and
    thinking_blocks, which the conversation stores and resends)."""
    data = _dump(raw)
    choices: list[ChatChoice] = []
    for position, choice in enumerate(data.get("choices") or []):
        choice = _dump(choice)
        choices.append(
            {
                "index": choice.get("index", position),
                "message": _message(_dump(choice.get("message")) or {}),
                "logprobs": choice.get("logprobs"),
                "finish_reason": choice.get("finish_reason") or "stop",
            }
        )
    response: ChatCompletion = {
        "id": data.get("id") or f"chatcmpl-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(data.get("created") or time.time()),
        "model": model_name,
        "choices": choices,
    }
    if data.get("system_fingerprint"):
        response["system_fingerprint"] = data["system_fingerprint"]
    usage = _clean_usage(data.get("usage"))
    if usage is not None:
        response["usage"] = usage
    return response


def _field(obj: object, name: str) -> Any:
    """``obj[name]`` for the direct path's dicts, ``obj.name`` for litellm's objects."""
    if type(obj) is dict:
        return obj.get(name)
    return getattr(obj, name, None)


def _delta(delta_obj: object) -> Delta:
    delta: Delta = {}
    if delta_obj is None:
        return delta
    role = _field(delta_obj, "role")
    if role:
        delta["role"] = role
    # vLLM and some others name it `reasoning`; litellm maps both to reasoning_content.
    reasoning = _field(delta_obj, "reasoning_content") or _field(delta_obj, "reasoning")
    if isinstance(reasoning, str) and reasoning:
        delta["reasoning_content"] = reasoning
    thinking_blocks = _thinking_blocks(_field(delta_obj, "thinking_blocks"))
    if thinking_blocks:
        delta["thinking_blocks"] = thinking_blocks
    content = _field(delta_obj, "content")
    if content is not None:
        delta["content"] = content
    tool_calls = _tool_call_deltas(_field(delta_obj, "tool_calls"))
    if tool_calls:
        delta["tool_calls"] = tool_calls
    return delta


def normalize_chunk(raw: object) -> ChatChunk:
    """A ``chat.completion.chunk``-like dict: choices with clean deltas, usage if any."""
    choices: list[ChunkChoice] = []
    for position, choice in enumerate(_field(raw, "choices") or []):
        index = _field(choice, "index")
        choices.append(
            {
                "index": position if index is None else index,
                "delta": _delta(_field(choice, "delta")),
                "finish_reason": _field(choice, "finish_reason"),
            }
        )
    return {
        "id": _field(raw, "id"),
        "created": _field(raw, "created"),
        "system_fingerprint": _field(raw, "system_fingerprint"),
        "choices": choices,
        "usage": _clean_usage(_field(raw, "usage")),
    }
