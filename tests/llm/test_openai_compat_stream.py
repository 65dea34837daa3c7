"""The direct transport's streaming: SSE parsing, errors in and before the stream, the
first-token timeout, and ``normalize_chunk`` on dicts (direct path) against SDK objects (litellm).

respx stands in for the upstream, as in test_openai_compat.py; the shared pieces are in
tests/support/openai_compat.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest
import respx
from openai.types.chat import ChatCompletionChunk

import app  # noqa: F401  (offline defaults before litellm)
from app.core.errors import ContextLengthExceeded
from app.llm.client import LLMClient
from app.llm.errors import map_upstream_error
from app.llm.openai_compat import UpstreamHTTPError
from app.llm.responses import normalize_chunk
from tests.support.openai_compat import MESSAGES, MODEL, URL, USAGE, chunk, failure, sse

# The fixtures, by name for pytest to find; ``x as x`` marks them as re-exported, not unused.
from tests.support.openai_compat import llm as llm
from tests.support.openai_compat import upstream as upstream


def tool_delta(**fields: Any) -> dict[str, Any]:
    return chunk({"tool_calls": [{"index": 0, **fields}]})


# --- streaming ----------------------------------------------------------------------------------

STREAM = sse(
    ": keep-alive",
    chunk({"role": "assistant", "content": ""}),
    "",
    ": keep-alive\nevent: message",
    "data: this is not json",
    "data:",
    chunk({"content": "Hel"}),
    "data:" + orjson.dumps(chunk({"content": "lo", "reasoning": "hmm"})).decode(),
    tool_delta(id="call_1", type="function", function={"name": "get_weather", "arguments": ""}),
    tool_delta(function={"arguments": '{"city"'}),
    tool_delta(function={"arguments": ': "Paris"}'}),
    chunk({}, "tool_calls"),
    {"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": USAGE},
    "data: [DONE]",
    chunk({"content": "after DONE, never read"}),
)


async def test_stream_parsing(upstream: respx.MockRouter, llm: Callable[..., LLMClient]) -> None:
    upstream.post(URL).respond(200, content=STREAM, headers={"content-type": "text/event-stream"})
    handle = await llm().stream(MODEL, MESSAGES)
    chunks = [c async for c in handle.chunks()]
    assert len(chunks) == 8
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert "".join(d.get("content", "") for d in deltas) == "Hello"
    assert deltas[2]["reasoning_content"] == "hmm"
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert [c["index"] for c in calls] == [0, 0, 0]
    assert calls[0] == {"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": ""}}  # fmt: skip
    assert "".join(c["function"]["arguments"] for c in calls) == '{"city": "Paris"}'
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]][-1] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == USAGE


async def test_error_event_mid_stream_raises(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    upstream.post(URL).respond(
        200, content=sse(chunk({"content": "a"}), {"error": {"message": "overloaded", "code": 503}})
    )
    handle = await llm(retries=2).stream(MODEL, MESSAGES)
    chunks = handle.chunks()
    assert (await anext(chunks))["choices"][0]["delta"] == {"content": "a"}
    with pytest.raises(UpstreamHTTPError) as info:
        await anext(chunks)
    assert (info.value.status_code, info.value.message) == (503, "overloaded")
    mapped = map_upstream_error(info.value, MODEL)
    assert (mapped.status_code, mapped.code) == (502, "upstream_error")
    assert "overloaded" in mapped.message


async def test_error_event_before_the_first_chunk_is_mapped_and_retried(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    route = upstream.post(URL).respond(200, content=sse({"error": {"message": "busy"}}))
    error = await failure(llm(retries=1), stream=True)
    assert (error.status_code, error.code, route.call_count) == (502, "upstream_error", 2)
    assert "busy" in error.message
    overflow = {"error": {"message": "This model's maximum context length is 10", "code": 400}}
    route.respond(200, content=sse(overflow))
    route.reset()
    error = await failure(llm(retries=1), stream=True)
    assert isinstance(error, ContextLengthExceeded)
    assert route.call_count == 1


async def test_stream_429_is_retried(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    route = upstream.post(URL).mock(
        side_effect=[
            httpx.Response(429, headers={"retry-after-ms": "5"}),
            httpx.Response(200, content=sse(chunk({"content": "ok"}), "data: [DONE]")),
        ]
    )
    handle = await llm(retries=1).stream(MODEL, MESSAGES)
    assert [c["choices"][0]["delta"] async for c in handle.chunks()] == [{"content": "ok"}]
    assert route.call_count == 2


async def test_first_token_timeout_when_headers_are_late(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    started: list[httpx.Request] = []

    async def late(request: httpx.Request) -> httpx.Response:
        started.append(request)
        await asyncio.sleep(5)
        return httpx.Response(200, content=sse(chunk({"content": "late"})))

    upstream.post(URL).mock(side_effect=late)
    error = await failure(llm(retries=2, first_token_timeout_s=0.05), stream=True)
    assert (error.status_code, error.code, len(started)) == (504, "first_token_timeout", 1)


async def test_first_token_timeout_when_the_first_event_is_late_closes_the_stream(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    closed: list[bool] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b": keep-alive\n\n"
            await asyncio.sleep(5)
            yield sse(chunk({"content": "late"}))
        finally:
            closed.append(True)

    upstream.post(URL).mock(side_effect=lambda request: httpx.Response(200, content=body()))
    error = await failure(llm(first_token_timeout_s=0.05), stream=True)
    assert (error.status_code, error.code) == (504, "first_token_timeout")
    assert closed == [True]


# --- normalize_chunk: dicts (direct path) and SDK objects (litellm path) agree -----------------


@pytest.mark.parametrize(
    "raw",
    [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}, system_fingerprint="fp_1"),
        tool_delta(id="call_1", type="function", function={"name": "f", "arguments": ""}),
        tool_delta(function={"arguments": '{"a": 1}'}),
        chunk({"reasoning_content": "because"}),
        chunk({}, "stop"),
        {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
         "choices": [], "usage": USAGE},
    ],
)  # fmt: skip
def test_normalize_chunk_dict_equals_sdk_object(raw: dict[str, Any]) -> None:
    from_dict = normalize_chunk(raw)
    assert from_dict == normalize_chunk(ChatCompletionChunk.model_validate(raw))
    assert from_dict["id"] == "c1"
    if raw["choices"]:
        assert from_dict["choices"][0]["index"] == 0
        assert from_dict["choices"][0]["finish_reason"] == raw["choices"][0]["finish_reason"]
    else:
        assert from_dict["usage"] == USAGE


def test_normalize_chunk_dict_without_index_or_usage() -> None:
    raw = {"choices": [{"delta": {"content": "x", "reasoning": "r"}}, {"delta": {}}]}
    normalized = normalize_chunk(raw)
    assert [c["index"] for c in normalized["choices"]] == [0, 1]
    assert normalized["choices"][0]["delta"] == {"reasoning_content": "r", "content": "x"}
    assert normalized["usage"] is None
