"""``X-Contextgate-*`` headers on every door (issue 13): /v1/responses and /v1/messages send
the conversation id and the context summary as /v1/chat/completions does, the cost only when
it is known (not on a stream, whose headers leave before the answer)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

MODEL = "gpt-4o-mini"

# What each door is asked: one user text, then the same conversation continued (streamed).
BODIES: dict[str, Any] = {
    "/v1/responses": lambda text, conversation=None: {
        "model": MODEL,
        "input": text,
        "instructions": "Be brief.",
        **({"conversation_id": conversation} if conversation else {}),
    },
    "/v1/messages": lambda text, conversation=None: {
        "model": MODEL,
        "max_tokens": 256,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": text}],
        **({"conversation_id": conversation} if conversation else {}),
    },
}


def summary(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith("x-contextgate-")}


@pytest.mark.parametrize("door", sorted(BODIES))
async def test_every_door_sends_the_context_headers(client: httpx.AsyncClient, door: str) -> None:
    response = await client.post(
        door,
        json={
            **BODIES[door]("Hello"),
            "attachments": [{"content": "A short memo.", "title": "memo"}],
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    utilization = body["context_utilization"]
    headers = response.headers
    conversation_id = headers["x-contextgate-conversation-id"]
    assert conversation_id.startswith("conv_")
    assert headers["x-conversation-id"] == conversation_id
    if "conversation_id" in body:
        assert body["conversation_id"] == conversation_id
    assert headers["x-contextgate-strategy"] == utilization["strategy"]
    assert int(headers["x-contextgate-tokens-used"]) == utilization["tokens_used"] > 0
    assert int(headers["x-contextgate-max-input-tokens"]) == utilization["max_input_tokens"]
    assert int(headers["x-contextgate-messages-included"]) == utilization["messages_included"]
    assert int(headers["x-contextgate-messages-excluded"]) == utilization["messages_excluded"]
    assert int(headers["x-contextgate-artifacts"]) == len(utilization["artifacts_processed"]) == 1
    assert headers["x-contextgate-llm-planning-used"] == "false"
    assert headers["x-contextgate-compacted"] == "false"
    assert float(headers["x-contextgate-cost-usd"]) >= 0

    stream = await client.post(
        door, json={**BODIES[door]("Again", conversation_id), "stream": True}
    )
    assert stream.status_code == 200, stream.text
    assert stream.headers["content-type"].startswith("text/event-stream")
    streamed = summary(stream.headers)
    assert streamed["x-contextgate-conversation-id"] == conversation_id
    assert stream.headers["x-conversation-id"] == conversation_id
    # The second call sends the stored turn too: more messages and tokens than the first.
    assert int(streamed["x-contextgate-messages-included"]) > int(
        headers["x-contextgate-messages-included"]
    )
    assert int(streamed["x-contextgate-tokens-used"]) > 0
    assert "x-contextgate-cost-usd" not in streamed  # unknown when the headers leave
    assert set(streamed) == set(summary(headers)) - {"x-contextgate-cost-usd"}
