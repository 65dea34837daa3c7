"""The chat pipeline in-process (ASGI) against the fake upstream and a real SQLite file."""

from __future__ import annotations

import httpx

from tests.fake_upstream import FakeUpstream


async def test_full_history_client_continues_one_conversation(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    first = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hello"},
            ],
        },
    )
    assert first.status_code == 200, first.text
    body = first.json()
    conversation_id = body["conversation_id"]
    assert first.headers["x-conversation-id"] == conversation_id
    answer = body["choices"][0]["message"]
    second = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hello"},
                answer,
                {"role": "user", "content": "and again"},
            ],
        },
    )
    assert second.json()["conversation_id"] == conversation_id
    stored = (await client.get(f"/v1/conversations/{conversation_id}")).json()
    assert [m["role"] for m in stored["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert [m["sequence_number"] for m in stored["messages"]] == [0, 1, 2, 3, 4]
    sent = fake_upstream.requests()[-1]["body"]["messages"]
    assert [m["content"] for m in sent][:3] == ["be brief", "hello", answer["content"]]
