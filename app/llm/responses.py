"""Turn litellm's response objects into OpenAI's exact wire shapes (plain dicts)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Usage", "normalize_chunk", "normalize_completion", "usage_of"]


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    raw: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """The two counts as chat usage (for a Usage built without the provider's raw one)."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


def usage_of(usage: dict[str, Any] | None) -> Usage | None:
    if not usage:
        return None
    return Usage(
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        raw=usage,
    )


def _dump(obj: Any) -> Any:
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if dump is not None:
        return dump(exclude_none=True)
    return dict(obj)


def _clean_tool_calls(calls: Any, *, streaming: bool) -> list[dict[str, Any]] | None:
    if not calls:
        return None
    cleaned = []
    for position, call in enumerate(calls):
        data = _dump(call)
        function = _dump(data.get("function")) or {}
        item: dict[str, Any] = {}
        if streaming:
            item["index"] = data.get("index", position)
        if data.get("id"):
            item["id"] = data["id"]
        if data.get("type") or data.get("id"):
            item["type"] = data.get("type") or "function"
        fn: dict[str, Any] = {}
        if function.get("name"):
            fn["name"] = function["name"]
        if function.get("arguments") is not None:
            fn["arguments"] = function["arguments"]
        elif not streaming:
            fn["arguments"] = ""
        item["function"] = fn
        cleaned.append(item)
    return cleaned


def _thinking_blocks(blocks: Any) -> list[dict[str, Any]] | None:
    """Thinking / redacted-thinking blocks as plain dicts, their bytes untouched."""
    if not blocks:
        return None
    return [dict(_dump(block)) for block in blocks]


def _clean_usage(usage: Any) -> dict[str, Any] | None:
    data = _dump(usage)
    if not data:
        return None
    keep = ("prompt_tokens", "completion_tokens", "total_tokens")
    cleaned: dict[str, Any] = {key: int(data.get(key) or 0) for key in keep}
    for key in ("prompt_tokens_details", "completion_tokens_details"):
        if isinstance(data.get(key), dict):
            cleaned[key] = {k: v for k, v in data[key].items() if v is not None}
    # Anthropic's prompt cache, as litellm reports it (cache reads are also cached_tokens).
    for key in ("cache_read_input_tokens", "cache_creation_input_tokens"):
        if isinstance(data.get(key), int) and data[key]:
            cleaned[key] = data[key]
    return cleaned


def normalize_completion(raw: Any, model_name: str) -> dict[str, Any]:
    """A ``chat.completion`` dict with only OpenAI's fields (plus reasoning_content and
    thinking_blocks, which the conversation stores and resends)."""
    data = _dump(raw)
    choices = []
    for position, choice in enumerate(data.get("choices") or []):
        choice = _dump(choice)
        source = _dump(choice.get("message")) or {}
        message: dict[str, Any] = {
            "role": source.get("role") or "assistant",
            "content": source.get("content"),
        }
        tool_calls = _clean_tool_calls(source.get("tool_calls"), streaming=False)
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
        choices.append(
            {
                "index": choice.get("index", position),
                "message": message,
                "logprobs": choice.get("logprobs"),
                "finish_reason": choice.get("finish_reason") or "stop",
            }
        )
    response: dict[str, Any] = {
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


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` for the direct path's dicts, ``obj.name`` for litellm's objects."""
    if type(obj) is dict:
        return obj.get(name)
    return getattr(obj, name, None)


def normalize_chunk(raw: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk``-like dict: choices with clean deltas, usage if any."""
    choices = []
    for position, choice in enumerate(_field(raw, "choices") or []):
        delta_obj = _field(choice, "delta")
        delta: dict[str, Any] = {}
        if delta_obj is not None:
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
            tool_calls = _clean_tool_calls(_field(delta_obj, "tool_calls"), streaming=True)
            if tool_calls:
                delta["tool_calls"] = tool_calls
        index = _field(choice, "index")
        choices.append(
            {
                "index": position if index is None else index,
                "delta": delta,
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
