"""Issue 15.2: one pathological message must not stall every tenant.

Token counting of large texts runs in a worker thread, in bounded (chunked) work, and one
message's size is capped by CONTEXTGATE_MAX_MESSAGE_CHARS with a clear 413 (on every door that
counts: chat, Responses, Anthropic's messages and count_tokens). Checked structurally (every
large count runs off the event loop's thread, in-process through each door) and end to end (a
real server keeps answering /health while it counts a 3 MB message of one repeated character,
which held the loop for seconds before).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

import app.tokens.counter as tokens_module
from app.core.settings import Settings
from app.tokens.counter import LARGE_TEXT_CHARS, TokenCounter
from tests.fake_upstream import FakeUpstream
from tests.support.proxy import ContextgateServer

MODEL = "gpt-4o-mini"


def _record_large_counts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """(length, ran on the main thread) of every large text tiktoken is asked to count."""
    calls: list[tuple[int, bool]] = []
    real = tokens_module._chunked_count

    def recording(encoding: Any, text: str) -> int:
        calls.append((len(text), threading.current_thread() is threading.main_thread()))
        return real(encoding, text)

    monkeypatch.setattr(tokens_module, "_chunked_count", recording)
    return calls


async def test_precount_runs_off_the_loop_and_feeds_the_sync_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _record_large_counts(monkeypatch)
    counter = TokenCounter()
    big = "a" * 300_000
    message = {"role": "user", "content": big}
    exact = await counter.count_messages_async([message], MODEL)
    assert calls == [(len(big), False)]
    # The synchronous calls after it are answered from the cache: no second encoding.
    assert counter.count_messages([message], MODEL) == exact
    assert counter.count_text(big, MODEL) == exact - 4 - 3
    assert calls == [(len(big), False)]
    # Bounded: the chunked count of an unbroken run is within a token per chunk of the truth,
    # and an ordinary text counts exactly as it does whole.
    whole = len(counter.encoding(MODEL).encode(big))
    assert whole <= exact - 7 <= whole + len(big) // 2048
    prose = " ".join(f"word{i % 97} and some text." for i in range(8000))
    assert counter.count_text(prose, MODEL) == len(counter.encoding(MODEL).encode(prose))
    counter.close()


async def test_the_loop_keeps_turning_while_a_large_text_is_counted() -> None:
    counter = TokenCounter()
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    await counter.precount(["b" * 1_500_000], MODEL)
    counting = time.perf_counter() - started
    done.set()
    await tick
    counter.close()
    # The loop turned all along: many ticks during the count, none as long as the count.
    assert len(gaps) >= 5
    assert max(gaps) < max(counting / 2, 0.5)


async def test_chat_pipeline_counts_large_messages_off_the_loop(
    client_for: Any,
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _record_large_counts(monkeypatch)
    client: httpx.AsyncClient = await client_for(make_settings())
    document = " ".join(f"line {i}: the quick brown fox." for i in range(3000))
    assert len(document) > LARGE_TEXT_CHARS
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "c" * 200_000 + " what is it?"}],
        "attachments": [{"content": document}],
    }
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert {length for length, _ in calls} >= {200_012, len(document)}
    assert not [call for call in calls if call[1]], calls


BIG = "c" * 200_000 + " what is it?"
INSTRUCTIONS = " ".join(f"rule {i}: answer briefly." for i in range(3000))
DOORS = {
    "/v1/responses": {"model": MODEL, "instructions": INSTRUCTIONS, "input": BIG},
    "/v1/messages": {
        "model": MODEL,
        "max_tokens": 64,
        "system": INSTRUCTIONS,
        "messages": [{"role": "user", "content": BIG}],
    },
}


@pytest.mark.parametrize("path", list(DOORS))
async def test_other_doors_count_large_texts_off_the_loop(
    client_for: Any,
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    """The Responses door's ``instructions`` (the request's own system prompt, not stored) and
    the Anthropic door's ``system`` are counted in the pool too, not on the loop."""
    calls = _record_large_counts(monkeypatch)
    client: httpx.AsyncClient = await client_for(make_settings())
    assert len(INSTRUCTIONS) > LARGE_TEXT_CHARS
    response = await client.post(path, json=DOORS[path])
    assert response.status_code == 200, response.text
    assert {length for length, _ in calls} >= {len(BIG), len(INSTRUCTIONS)}
    assert not [call for call in calls if call[1]], calls


async def test_count_tokens_counts_large_texts_off_the_loop(
    client_for: Any,
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": BIG}]
    counter = TokenCounter()
    expected = counter.count_messages(messages, MODEL)  # here, before the recording starts
    counter.close()
    calls = _record_large_counts(monkeypatch)
    client: httpx.AsyncClient = await client_for(make_settings())
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}}
    tool = {"name": "lookup", "description": "Look it up.", "input_schema": schema}
    body = {"model": MODEL, "system": INSTRUCTIONS, "messages": [{"role": "user", "content": BIG}]}
    plain = await client.post("/v1/messages/count_tokens", json=body)
    assert plain.status_code == 200, plain.text
    with_tools = await client.post("/v1/messages/count_tokens", json={**body, "tools": [tool]})
    assert with_tools.status_code == 200, with_tools.text
    # Counted as before: the messages, plus the tools' text.
    assert plain.json()["input_tokens"] == expected
    assert with_tools.json()["input_tokens"] > plain.json()["input_tokens"] + 2000
    tools_chars = max(length for length, _ in calls)
    assert tools_chars > LARGE_TEXT_CHARS
    assert {length for length, _ in calls} >= {len(BIG), len(INSTRUCTIONS), tools_chars}
    assert not [call for call in calls if call[1]], calls


async def test_count_tokens_caps_a_message_with_anthropics_413(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    client: httpx.AsyncClient = await client_for(make_settings(max_message_chars=1_000))
    url = "/v1/messages/count_tokens"
    ok = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 1_000}]}
    assert (await client.post(url, json=ok)).status_code == 200
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": "y" * 1_000}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "z" * 1_001}
    for messages in (
        [{"role": "user", "content": "x" * 1_001}],
        [{"role": "user", "content": [{"type": "text", "text": "x" * 1_001}]}],
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use]}],
        [{"role": "user", "content": [result]}],
    ):
        response = await client.post(url, json={**ok, "messages": messages})
        assert response.status_code == 413, (messages, response.text)
        assert response.json()["type"] == "error"
        error = response.json()["error"]
        assert error["type"] == "request_too_large"
        assert "CONTEXTGATE_MAX_MESSAGE_CHARS" in error["message"]
    too_long_system = {**ok, "system": "s" * 1_001}
    assert (await client.post(url, json=too_long_system)).status_code == 413


@pytest.mark.parametrize("size", [1_001, 2_000])
async def test_a_message_over_the_cap_is_413_and_nothing_is_stored(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream, size: int
) -> None:
    client: httpx.AsyncClient = await client_for(make_settings(max_message_chars=1_000))
    ok = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 1_000}]}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hello"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "y" * size},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    response = await client.post("/v1/chat/completions", json={**ok, "messages": messages})
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "message_too_large"
    assert error["param"] == "messages.1.content"
    assert "CONTEXTGATE_MAX_MESSAGE_CHARS" in error["message"]
    parts = [{"type": "text", "text": "z" * size}]
    too_big = {**ok, "messages": [{"role": "user", "content": parts}]}
    response = await client.post("/v1/chat/completions", json=too_big)
    assert response.status_code == 413
    assert response.json()["error"]["param"] == "messages.0.content"
    assert (await client.get("/v1/conversations")).json()["data"] == []
    assert fake_upstream.stats()["calls"] == 0
    assert (await client.post("/v1/chat/completions", json=ok)).status_code == 200


@pytest.mark.e2e
def test_health_answers_while_a_pathological_message_is_counted(
    start_proxy: Callable[..., ContextgateServer],
) -> None:
    """3.5 MB of one character (a base64 blob, minified data) used to hold the event loop for
    many seconds; /health must keep answering. The bound is generous for a busy machine."""
    server = start_proxy()
    # One ordinary turn first: the first request's one-time work (mapper set-up, imports) is
    # not what this test measures.
    warm = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}
    assert httpx.post(f"{server.base_url}/chat/completions", json=warm, timeout=60).is_success
    body = {"model": MODEL, "messages": [{"role": "user", "content": "a" * 3_500_000}]}
    latencies: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            while not stop.is_set():
                started = time.perf_counter()
                assert http.get("/health").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.05)

    with ThreadPoolExecutor(1) as pool:
        poller = pool.submit(poll)
        time.sleep(0.2)
        with httpx.Client(base_url=server.url, timeout=120) as http:
            response = http.post("/v1/chat/completions", json=body)
        stop.set()
        poller.result()
    # Far over any window: a clear 400, never a 5xx.
    assert response.status_code == 400, response.text[:300]
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert len(latencies) >= 3
    assert max(latencies) < 2.0, sorted(latencies)[-5:]
