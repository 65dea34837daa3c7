"""Streams under faults: an upstream that drops mid-stream, a client that goes away."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream

WORDS = " ".join(f"w{i}" for i in range(40))


async def _conversation_messages(client: httpx.AsyncClient, conversation_id: str) -> list[Any]:
    response = await client.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def test_upstream_drop_mid_stream_ends_with_error_frame_and_stores_partial(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults("*", [{"drop_after_chunks": 4}])
    sdk = openai.AsyncOpenAI(
        base_url="http://contextgate/v1", api_key="unused", http_client=client, max_retries=0
    )
    received: list[str] = []

    async def consume() -> None:
        stream = await sdk.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": WORDS}],
            stream=True,
        )
        async for chunk in stream:
            assert not (chunk.choices and chunk.choices[0].finish_reason == "stop")
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)

    with pytest.raises(openai.APIError):
        await consume()
    listing = (await client.get("/v1/conversations")).json()["data"]
    messages = await _conversation_messages(client, listing[0]["id"])
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["status"] == "incomplete"
    # What the client saw is what is stored. (litellm sometimes drops the chunks it had
    # buffered when the connection breaks, so how much arrives before the drop varies.)
    assert (messages[-1]["content"] or "") == "".join(received)


async def test_raw_error_frame_has_openai_shape(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults("*", [{"drop_after_chunks": 3}])
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": WORDS}]}
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        raw = (await response.aread()).decode()
    events = [e for e in raw.split("\n\n") if e]
    assert events[-1].startswith('data: {"error":')
    assert "[DONE]" not in raw
    assert '"finish_reason":"stop"' not in raw
