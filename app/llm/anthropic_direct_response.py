"""Anthropic's Messages answer as the chat form litellm makes of it (non-streaming and streamed).

The direct Anthropic path (app/llm/anthropic_direct.py) must hand contextgate the same
completion and the same stream chunks litellm's anthropic provider does, so that what is
stored, priced and rendered does not depend on the path: text joined, ``tool_use`` blocks as
tool calls with ``json.dumps`` arguments, thinking and redacted-thinking blocks as
``thinking_blocks`` (their text joined as ``reasoning_content``), the stop reason mapped, and
Anthropic's usage as litellm counts it (``prompt_tokens`` with the cache's reads and writes in
it, ``prompt_tokens_details``, and the reasoning tokens litellm estimates with ``cl100k_base``
when Anthropic does not report them).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from functools import lru_cache
from typing import Any

import httpx
import tiktoken

from app.wire.json import JSONObject

__all__ = ["AnthropicChunks", "chat_completion", "finish_reason", "usage"]

_FINISH = {
    "stop_sequence": "stop",
    "end_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "compaction": "length",
}


def finish_reason(stop_reason: object) -> str:
    return _FINISH.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


@lru_cache(maxsize=1)
def _cl100k() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base")


def _reasoning_tokens(text: str) -> int:
    return len(_cl100k().encode(text, disallowed_special=()))


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _thinking_tokens(usage: object) -> int | None:
    """The thinking tokens Anthropic reports (``output_tokens_details.thinking_tokens``)."""
    details = usage.get("output_tokens_details") if isinstance(usage, Mapping) else None
    value = details.get("thinking_tokens") if isinstance(details, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cache_creation(raw: Mapping[str, Any], iterations: list[Any]) -> JSONObject | None:
    """litellm's ``_resolve_cache_creation_token_details``."""
    if iterations:
        parts = [i.get("cache_creation") for i in iterations if isinstance(i, Mapping)]
        breakdowns = [c for c in parts if isinstance(c, Mapping)]
        if breakdowns:
            five = sum(int(c.get("ephemeral_5m_input_tokens") or 0) for c in breakdowns)
            hour = sum(int(c.get("ephemeral_1h_input_tokens") or 0) for c in breakdowns)
            total = sum(int(i.get("cache_creation_input_tokens") or 0) for i in iterations)
            return {
                "ephemeral_5m_input_tokens": five + max(total - five - hour, 0),
                "ephemeral_1h_input_tokens": hour,
            }
    creation = raw.get("cache_creation")
    if not isinstance(creation, Mapping):
        return None
    return {
        key: creation[key]
        for key in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
        if creation.get(key) is not None
    }


def usage(
    raw: Mapping[str, Any], reasoning: str | None, has_thinking_block: bool = False
) -> JSONObject:
    """litellm's ``calculate_usage`` of Anthropic's ``usage``, as its Usage dumps (the fields
    normalize_completion reads; the server tools' counts it leaves aside)."""
    prompt = _int(raw.get("input_tokens") or 0)
    completion = _int(raw.get("output_tokens") or 0)
    writes = reads = 0
    iterations = raw.get("iterations") or []
    if iterations:
        prompt = sum(it.get("input_tokens", 0) or 0 for it in iterations)
        completion = sum(it.get("output_tokens", 0) or 0 for it in iterations)
        writes = sum(it.get("cache_creation_input_tokens", 0) or 0 for it in iterations)
        reads = sum(it.get("cache_read_input_tokens", 0) or 0 for it in iterations)
        prompt += writes + reads
    else:
        if raw.get("cache_creation_input_tokens") is not None:
            writes = raw["cache_creation_input_tokens"]
            prompt += writes
        if raw.get("cache_read_input_tokens") is not None:
            reads = raw["cache_read_input_tokens"]
            prompt += reads
    details: JSONObject = {
        "cached_tokens": reads,
        "text_tokens": prompt - reads - writes,
        "cache_creation_tokens": writes,
        "cache_write_tokens": writes,
    }
    creation = _cache_creation(raw, iterations)
    if creation is not None:
        details["cache_creation_token_details"] = creation
    reported = _thinking_tokens(raw)
    if iterations:
        counted = [_thinking_tokens(it) for it in iterations]
        reported = None if None in counted else sum(c for c in counted if c is not None)
    completion_details: JSONObject
    if reported is not None:
        capped = min(max(0, reported), completion)
        completion_details = {"reasoning_tokens": capped, "text_tokens": completion - capped}
    elif reasoning:
        estimated = max(0, min(_reasoning_tokens(reasoning), completion))
        completion_details = {"reasoning_tokens": estimated, "text_tokens": completion - estimated}
    elif has_thinking_block:
        completion_details = {}
    else:
        completion_details = {"reasoning_tokens": 0, "text_tokens": completion}
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": details,
        "completion_tokens_details": completion_details,
        "cache_creation_input_tokens": writes,
        "cache_read_input_tokens": reads,
    }


async def _next(events: AsyncIterator[JSONObject], *, finished: bool) -> JSONObject | None:
    """The next event; None at the end, or when the connection breaks after the stop reason
    came (the answer is whole: litellm ends such a stream normally too)."""
    try:
        return await anext(events)
    except StopAsyncIteration:
        return None
    except httpx.HTTPError:
        if not finished:
            raise
        return None


def _chat_id() -> str:
    return f"chatcmpl-{uuid.uuid4()}"


def chat_completion(message: Mapping[str, Any]) -> JSONObject:
    """Anthropic's ``message`` as litellm's chat completion (read by normalize_completion)."""
    text = ""
    calls: list[JSONObject] = []
    thinking: list[JSONObject] | None = None
    for index, block in enumerate(message.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            text += block["text"]
        elif kind in ("tool_use", "server_tool_use"):
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": json.dumps(block["input"])},
                    "index": index,
                }
            )
        elif kind in ("thinking", "redacted_thinking"):
            thinking = [*(thinking or []), block]
        # Citations, server tools' results and compaction blocks: litellm keeps them in its
        # provider_specific_fields, which contextgate does not read.
    reasoning: str | None = None
    if thinking is not None:
        reasoning = "".join(b["thinking"] for b in thinking if isinstance(b.get("thinking"), str))
    chat: JSONObject = {"role": "assistant", "content": text or None}
    if calls:
        chat["tool_calls"] = calls
    if thinking is not None:
        chat["thinking_blocks"] = thinking
        chat["reasoning_content"] = reasoning
    return {
        "id": _chat_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": message.get("model"),
        "choices": [
            {
                "index": 0,
                "message": chat,
                "finish_reason": finish_reason(message.get("stop_reason")),
            }
        ],
        "usage": usage(message.get("usage") or {}, reasoning, thinking is not None),
    }


class AnthropicChunks:
    """Anthropic's stream events (dicts) as the chat chunks litellm's stream wrapper yields:
    the first chunk with the role, one chunk per text, thinking, signature, redacted-thinking
    and tool-call piece, the finish reason on a chunk of its own, the usage on a last one."""

    def __init__(self, events: AsyncIterator[JSONObject]) -> None:
        self._events = events
        self._chunks = self._read()
        self._id = _chat_id()
        self._created = int(time.time())
        self._role_sent = False

    def __aiter__(self) -> AnthropicChunks:
        return self

    async def __anext__(self) -> JSONObject:
        chunk: JSONObject = await self._chunks.__anext__()
        return chunk

    async def aclose(self) -> None:
        await self._chunks.aclose()
        closer = getattr(self._events, "aclose", None)
        if closer is not None:
            await closer()

    def _chunk(
        self, delta: JSONObject, finish: str | None = None, used: JSONObject | None = None
    ) -> JSONObject:
        if not self._role_sent and delta:
            delta = {"role": "assistant", **delta}
            self._role_sent = True
        return {
            "id": self._id,
            "created": self._created,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": used,
        }

    async def _read(self) -> Any:
        tool_index = -1
        block_type: str | None = None
        arguments = ""
        reasoning: list[str] = []
        cumulative: dict[str, Any] = {}
        final_usage: JSONObject | None = None
        finish: str | None = None
        events = aiter(self._events)
        while (event := await _next(events, finished=finish is not None)) is not None:
            kind = event.get("type")
            if kind == "content_block_start":
                block = event.get("content_block") or {}
                block_type = block.get("type")
                arguments = ""
                if block_type == "text":
                    if block.get("text"):
                        yield self._chunk({"content": block["text"]})
                elif block_type in ("tool_use", "server_tool_use"):
                    tool_index += 1
                    call = {
                        "id": block["id"],
                        "type": "function",
                        "function": {"name": block["name"], "arguments": ""},
                        "index": tool_index,
                    }
                    yield self._chunk({"content": "", "tool_calls": [call]})
                elif block_type == "redacted_thinking":
                    redacted = {"type": "redacted_thinking", "data": block["data"]}
                    yield self._chunk({"content": "", "thinking_blocks": [redacted]})
            elif kind == "content_block_delta":
                delta = event.get("delta") or {}
                if "text" in delta:
                    if delta["text"]:
                        yield self._chunk({"content": delta["text"]})
                elif "partial_json" in delta:
                    arguments += delta["partial_json"]
                    if block_type in ("tool_use", "server_tool_use"):
                        call = {
                            "type": "function",
                            "function": {"arguments": delta["partial_json"]},
                            "index": tool_index,
                        }
                        yield self._chunk({"content": "", "tool_calls": [call]})
                elif "thinking" in delta or "signature" in delta:
                    out: JSONObject = {"content": ""}
                    thought = delta.get("thinking")
                    if isinstance(thought, str) and thought:
                        reasoning.append(thought)
                        out["reasoning_content"] = thought
                        out["thinking_blocks"] = [{"type": "thinking", "thinking": thought}]
                    signature = delta.get("signature")
                    if isinstance(signature, str) and signature:
                        out["thinking_blocks"] = [
                            {"type": "thinking", "thinking": "", "signature": signature}
                        ]
                    if len(out) > 1:
                        yield self._chunk(out)
                # citations and compaction deltas: litellm's provider_specific_fields only
            elif kind == "content_block_stop":
                if block_type in ("tool_use", "server_tool_use") and not arguments:
                    call = {
                        "type": "function",
                        "function": {"arguments": "{}"},
                        "index": tool_index,
                    }
                    yield self._chunk({"content": "", "tool_calls": [call]})
                block_type = None
            elif kind == "message_start":
                start_usage = (event.get("message") or {}).get("usage")
                if isinstance(start_usage, Mapping):
                    cumulative.update(start_usage)
            elif kind == "message_delta":
                delta = event.get("delta") or {}
                finish = finish_reason(delta.get("stop_reason", "stop") or "stop")
                if isinstance(event.get("usage"), Mapping):
                    cumulative.update(event["usage"])
                    final_usage = usage(cumulative, "".join(reasoning) or None)
                yield self._chunk({}, finish)
            elif kind == "error":
                from app.llm.sse_stream import UpstreamHTTPError

                error = event.get("error") or {}
                raise UpstreamHTTPError(500, {"type": "error", "error": error})
        if finish is not None and final_usage is not None:
            yield self._chunk({}, None, final_usage)
