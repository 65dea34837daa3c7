"""Tests of the fake OpenAI-compatible upstream itself, through the real `openai` SDK and httpx."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from app.tokens.counter import TokenCounter
from tests.fake_upstream import FakeUpstream
from tests.fake_upstream.responses import embed_text

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as upstream:
        yield upstream


@pytest.fixture(autouse=True)
def _reset(fake: FakeUpstream) -> None:
    fake.reset()


@pytest.fixture(scope="module")
def client(fake: FakeUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0, timeout=10) as c:
        yield c


def _user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def test_health_and_models(fake: FakeUpstream, client: openai.OpenAI) -> None:
    assert httpx.get(f"{fake.url}/health").json() == {"ok": True}
    ids = [m.id for m in client.models.list()]
    assert ids == ["fake-model", "gpt-4o-mini", "fake-planner", "fake-summarizer", "fake-embed"]


def test_non_stream_echo(fake: FakeUpstream, client: openai.OpenAI) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "you"}],
        },
    ]
    out = client.chat.completions.create(model="whatever-model", messages=messages)
    assert out.id.startswith("chatcmpl-fake-")
    assert out.object == "chat.completion"
    assert out.model == "whatever-model"
    assert out.system_fingerprint == "fp_fake"
    choice = out.choices[0]
    assert choice.message.content == "Echo: hello you"
    assert choice.finish_reason == "stop"
    assert choice.logprobs is None
    assert out.usage is not None
    # OpenAI's count: its tokenizer (the one contextgate counts with), 1.0x by default
    assert out.usage.prompt_tokens == TokenCounter().count_messages(messages, "whatever-model")
    assert out.usage.completion_tokens == len("Echo: hello you") // 4 + 1
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    long = client.chat.completions.create(model="m", messages=_user("x" * 500))
    assert long.choices[0].message.content == "Echo: " + "x" * 200
    again = client.chat.completions.create(model="whatever-model", messages=messages)
    assert again.choices[0].message.content == choice.message.content
    assert again.usage == out.usage


def test_stream_chunks_and_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="fake-model",
        messages=_user("one two three four"),
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    text_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(text_chunks) == 5  # "Echo: " + four words
    assert (
        "".join(c.choices[0].delta.content or "" for c in text_chunks) == "Echo: one two three four"
    )
    finish = chunks[-2]
    assert finish.choices[0].finish_reason == "stop"
    assert finish.choices[0].delta.content is None
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens == len("Echo: one two three four") // 4 + 1
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_without_usage_raw_sse(fake: FakeUpstream) -> None:
    body = {"model": "m", "stream": True, "messages": _user("hi")}
    with httpx.stream("POST", f"{fake.base_url}/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(e[6:]) for e in events[:-1]]
    assert payloads[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in p for p in payloads)


def test_tool_call_then_tool_result(client: openai.OpenAI) -> None:
    text = 'Weather please.\nCALL_TOOL:get_weather:{"city":"Paris"}'
    out = client.chat.completions.create(model="m", messages=_user(text), tools=TOOLS)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.id.startswith("call_")
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    # Without tools in the request the directive is just echoed.
    plain = client.chat.completions.create(model="m", messages=_user("CALL_TOOL:x:{}"))
    assert plain.choices[0].message.content == "Echo: CALL_TOOL:x:{}"

    history: list[Any] = [
        *_user(text),
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "18C sunny"},
        {"role": "tool", "tool_call_id": "call_other", "content": "no rain"},
    ]
    result = client.chat.completions.create(model="m", messages=history, tools=TOOLS)
    assert result.choices[0].message.content == "Tool results: 18C sunny | no rain"

    stream = client.chat.completions.create(
        model="m", messages=_user(text), tools=TOOLS, stream=True
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices[0].delta.tool_calls]
    head = deltas[0][0]
    assert head.index == 0
    assert head.id is not None
    assert head.function is not None
    assert head.function.name == "get_weather"
    assert head.function.arguments == ""
    args = "".join((d[0].function.arguments or "") for d in deltas[1:] if d[0].function)
    assert json.loads(args) == {"city": "Paris"}
    assert len(deltas) > 2
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_reasoning_and_json_mode(client: openai.OpenAI) -> None:
    out = client.chat.completions.create(model="deep-reasoner", messages=_user("why?"))
    assert out.choices[0].message.model_extra == {"reasoning_content": "Thinking about: why?"}
    out = client.chat.completions.create(model="m", messages=_user("why?"), reasoning_effort="low")
    assert (out.choices[0].message.model_extra or {}).get("reasoning_content")
    stream = client.chat.completions.create(
        model="deep-reasoner", messages=_user("why?"), stream=True
    )
    kinds = []
    for chunk in stream:
        extra = chunk.choices[0].delta.model_extra or {}
        kinds += ["r"] if extra.get("reasoning_content") else []
        kinds += ["c"] if chunk.choices[0].delta.content else []
    assert kinds == sorted(kinds, reverse=True)
    assert "r" in kinds
    assert "c" in kinds
    js = client.chat.completions.create(
        model="m", messages=_user("give json"), response_format={"type": "json_object"}
    )
    assert js.choices[0].message.content == "{}"


def test_scripted_responses(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script("fake-planner", ["plan A", {"content": "plan B", "delay_ms": 100}, "plan C"])
    fake.script("fake-planner", [{"tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}])

    def ask(model: str = "fake-planner") -> str | None:
        return (
            client.chat.completions.create(model=model, messages=_user("go"))
            .choices[0]
            .message.content
        )

    assert ask("other-model") == "Echo: go"
    assert ask() == "plan A"
    started = time.monotonic()
    assert ask() == "plan B"
    assert time.monotonic() - started >= 0.1
    stream = client.chat.completions.create(model="fake-planner", messages=_user("go"), stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "plan C"
    tool = client.chat.completions.create(model="fake-planner", messages=_user("go"))
    assert tool.choices[0].message.tool_calls is not None
    assert tool.choices[0].message.tool_calls[0].function.arguments == '{"q":"x"}'
    assert ask() == "Echo: go"


def test_rate_limit_fault(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.faults("fake-model", [{"status": 429, "headers": {"Retry-After": "1"}}])
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="fake-model", messages=_user("hi"))
    assert info.value.response.headers["retry-after"] == "1"
    assert info.value.code == "rate_limit_exceeded"
    # One fault per call: the next call succeeds.
    ok = client.chat.completions.create(model="fake-model", messages=_user("hi"))
    assert ok.choices[0].message.content == "Echo: hi"
    # A FAULT directive applies on every call that sees it; "*" faults match any model.
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=_user('FAULT:{"status":500}'))
    fake.faults("*", [{"status": 400, "body": {"error": {"message": "custom", "type": "t"}}}])
    with pytest.raises(openai.BadRequestError, match="custom"):
        client.chat.completions.create(model="any", messages=_user("hi"))


def test_drop_after_chunks(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.faults("fake-model", [{"drop_after_chunks": 3}])
    stream = client.chat.completions.create(
        model="fake-model", messages=_user("a b c d e f g h"), stream=True
    )
    received = []
    with pytest.raises((httpx.RemoteProtocolError, openai.APIError)):  # noqa: PT012
        for chunk in stream:
            received.append(chunk)
    assert len(received) == 3
    stream.close()


def test_reject_key_and_recorded_requests(fake: FakeUpstream, client: openai.OpenAI) -> None:
    client.chat.completions.create(model="m", messages=_user("first"))
    with (
        openai.OpenAI(base_url=fake.base_url, api_key="reject-me", max_retries=0) as bad,
        pytest.raises(openai.AuthenticationError),
    ):
        bad.chat.completions.create(model="m", messages=_user("second"))
    client.embeddings.create(model="fake-embed", input="third")
    recorded = fake.requests()
    assert [r["path"] for r in recorded] == ["/v1/chat/completions"] * 2 + ["/v1/embeddings"]
    assert recorded[0]["headers"]["authorization"] == "Bearer sk-test"
    assert recorded[1]["headers"]["authorization"] == "Bearer reject-me"
    assert recorded[0]["body"]["messages"] == _user("first")
    assert recorded[2]["body"]["input"] == "third"
    assert fake.stats()["calls"] == 3


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_embeddings_similarity(fake: FakeUpstream, client: openai.OpenAI) -> None:
    texts = [
        "The cat sat on the mat",
        "the CAT sat on the mat",
        "a cat on a mat",
        "quantum tax law",
    ]
    out = client.embeddings.create(model="fake-embed", input=texts)  # base64 by default
    vectors = [d.embedding for d in out.data]
    assert [len(v) for v in vectors] == [64] * 4
    assert _cosine(vectors[0], vectors[1]) == pytest.approx(1.0)
    assert _cosine(vectors[0], vectors[2]) > _cosine(vectors[0], vectors[3])
    assert out.usage.prompt_tokens > 0
    floats = client.embeddings.create(model="fake-embed", input=texts[0], encoding_format="float")
    assert floats.data[0].embedding == pytest.approx(embed_text(texts[0]))
    assert vectors[0] == pytest.approx(embed_text(texts[0]), abs=1e-6)


async def test_reset_and_disconnect_stats(fake: FakeUpstream) -> None:
    await fake.ascript("fake-planner", ["scripted"])
    await fake.afaults("fake-planner", [{"status": 500}])
    body = {"model": "m", "stream": True, "messages": _user('FAULT:{"hang": true}')}
    async with httpx.AsyncClient(base_url=fake.base_url, timeout=5) as http:
        async with http.stream("POST", "/chat/completions", json=body) as response:
            assert response.status_code == 200
            assert (await fake.astats())["active_streams"] == 1
        # Leaving the block closes the connection mid-stream: the fake notices.
        for _ in range(100):
            stats = await fake.astats()
            if stats["disconnects"]:
                break
            await asyncio.sleep(0.02)
        assert stats == {"calls": 1, "disconnects": 1, "active_streams": 0}
        # A hung non-streaming call whose client gives up is counted too.
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/chat/completions", json={**body, "stream": False}, timeout=0.2)
        for _ in range(100):
            stats = await fake.astats()
            if stats["disconnects"] == 2:
                break
            await asyncio.sleep(0.02)
        assert stats == {"calls": 2, "disconnects": 2, "active_streams": 0}
        assert len(await fake.arequests()) == 2
        await fake.areset()
        assert await fake.arequests() == []
        assert await fake.astats() == {"calls": 0, "disconnects": 0, "active_streams": 0}
        answer = await http.post(
            "/chat/completions", json={"model": "fake-planner", "messages": _user("hi")}
        )
        assert answer.json()["choices"][0]["message"]["content"] == "Echo: hi"
        assert answer.json()["id"] == "chatcmpl-fake-1"


def test_latency_header(fake: FakeUpstream) -> None:
    body = {"model": "m", "messages": _user("hi")}
    started = time.monotonic()
    response = httpx.post(
        f"{fake.base_url}/chat/completions", json=body, headers={"X-Fake-Latency-Ms": "150"}
    )
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.15


def test_a_cacher_model_reports_openais_cached_tokens(client: openai.OpenAI) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "You answer briefly. " * 30},
        {"role": "user", "content": "first"},
    ]
    first = client.chat.completions.create(model="gpt-cacher", messages=messages)
    assert first.usage is not None
    assert first.usage.prompt_tokens_details is None  # nothing seen before
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "second"}]
    second = client.chat.completions.create(model="gpt-cacher", messages=messages)
    assert second.usage is not None
    assert second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens == first.usage.prompt_tokens
    plain = client.chat.completions.create(model="fake-model", messages=messages)
    assert plain.usage is not None
    assert plain.usage.prompt_tokens_details is None  # other models report no cache


def test_gemini_generate_content_reports_implicit_hits(fake: FakeUpstream) -> None:
    url = f"{fake.url}/v1beta/models/gemini-2.5-flash"
    body: dict[str, Any] = {
        "system_instruction": {"parts": [{"text": "Be brief. " * 30}]},
        "contents": [{"role": "user", "parts": [{"text": "first"}]}],
    }
    first = httpx.post(f"{url}:generateContent", json=body).json()
    assert "cachedContentTokenCount" not in first["usageMetadata"]
    assert first["candidates"][0]["content"]["parts"][0]["text"] == "Echo: first"
    body["contents"] += [
        {"role": "model", "parts": [{"text": "Echo: first"}]},
        {"role": "user", "parts": [{"text": "second"}]},
    ]
    streamed = httpx.post(f"{url}:streamGenerateContent", params={"alt": "sse"}, json=body)
    chunks = [
        json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")
    ]
    usage = chunks[-1]["usageMetadata"]
    assert 0 < usage["cachedContentTokenCount"] < usage["promptTokenCount"]
    assert "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks) == (
        "Echo: second"
    )
    refused = httpx.post(f"{url}:generateContent", json={"contents": []})
    assert refused.status_code == 400
    assert refused.json()["error"]["status"] == "INVALID_ARGUMENT"
    bad_role = {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}
    assert httpx.post(f"{url}:generateContent", json=bad_role).status_code == 400
