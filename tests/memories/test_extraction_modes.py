"""Seed 003's extraction modes: every_turn, periodic, on_save (POST /v1/conversations/{id}/save)
and llm_triggered (a `remember` tool the client never sees), non-streaming and streaming."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import chat, drain, upstream_chats


def extracted(*contents: str) -> str:
    return orjson.dumps(
        {
            "memories": [
                {"content": c, "memory_type": "preference", "importance": 7} for c in contents
            ]
        }
    ).decode()


async def contents(client: httpx.AsyncClient, user: str) -> list[str]:
    data = (await client.get("/v1/memories", params={"user": user})).json()["data"]
    return sorted(m["content"] for m in data)


async def talk(
    client: httpx.AsyncClient, user: str, texts: list[str], context: dict[str, Any],
    conversation_id: str | None = None,
) -> str:  # fmt: skip
    for text in texts:
        result = await chat(
            client, text, user=user, conversation_id=conversation_id, context=context
        )
        conversation_id = result["conversation_id"]
        await drain(client)
    assert conversation_id is not None
    return conversation_id


async def test_every_turn_and_periodic(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(
        make_settings(summarizer_model="fake-summarizer", memory_extraction_every=2)
    )
    fake_upstream.script("fake-summarizer", [extracted("Likes tea"), extracted("Likes jazz")])
    await talk(client, "u1", ["I like tea", "I like jazz"], {"memory_extraction": "every_turn"})
    assert await contents(client, "u1") == ["Likes jazz", "Likes tea"]
    assert len(upstream_chats(fake_upstream, "fake-summarizer")) == 2

    fake_upstream.script("fake-summarizer", [extracted("Rides a bike")])
    conversation_id = await talk(client, "u2", ["one"], {"memory_extraction": "periodic"})
    assert len(upstream_chats(fake_upstream, "fake-summarizer")) == 2  # not after 1 turn
    await talk(client, "u2", ["I ride a bike"], {"memory_extraction": "periodic"}, conversation_id)
    assert await contents(client, "u2") == ["Rides a bike"]
    prompt = upstream_chats(fake_upstream, "fake-summarizer")[-1]["messages"][1]["content"]
    assert "[turn 1] user: one" in prompt
    assert "[turn 2] user: I ride a bike" in prompt


async def test_on_save_extracts_once_per_turn_when_the_client_saves(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(
        make_settings(summarizer_model="fake-summarizer", memory_extraction_mode="on_save")
    )
    conversation_id = await talk(client, "sam", ["I love hiking", "And chess"], {})
    assert upstream_chats(fake_upstream, "fake-summarizer") == []  # nothing until the save

    fake_upstream.script("fake-summarizer", [extracted("Loves hiking", "Plays chess")])
    saved = await client.post(f"/v1/conversations/{conversation_id}/save", json={"user": "sam"})
    assert saved.status_code == 200, saved.text
    assert saved.json() == {
        "id": conversation_id, "object": "conversation.saved", "user": "sam", "status": "saved",
        "first_turn": 1, "last_turn": 2, "memories_extracted": 2, "error": None,
    }  # fmt: skip
    assert await contents(client, "sam") == ["Loves hiking", "Plays chess"]
    again = await client.post(f"/v1/conversations/{conversation_id}/save", json={"user": "sam"})
    assert again.json()["status"] == "nothing_new"
    assert len(upstream_chats(fake_upstream, "fake-summarizer")) == 1

    await talk(client, "sam", ["I moved to Oslo"], {}, conversation_id)
    fake_upstream.faults("fake-summarizer", [{"status": 500}])
    failed = await client.post(f"/v1/conversations/{conversation_id}/save", json={"user": "sam"})
    assert failed.status_code == 200
    assert failed.json()["status"] == "failed"
    assert "fake-summarizer" in failed.json()["error"]
    fake_upstream.script("fake-summarizer", [extracted("Lives in Oslo")])
    retried = await client.post(f"/v1/conversations/{conversation_id}/save", json={"user": "sam"})
    assert (retried.json()["first_turn"], retried.json()["last_turn"]) == (3, 3)
    prompt = upstream_chats(fake_upstream, "fake-summarizer")[-1]["messages"][1]["content"]
    assert "I moved to Oslo" in prompt
    assert "I love hiking" not in prompt  # only the turns not read by an earlier save

    missing = await client.post("/v1/conversations/conv_nope/save", json={"user": "sam"})
    assert missing.status_code == 404
    no_user = await client.post(f"/v1/conversations/{conversation_id}/save", json={})
    assert no_user.status_code == 400
    no_body = await client.post(f"/v1/conversations/{conversation_id}/save")
    assert no_body.status_code == 400
    assert no_body.json()["error"]["param"] == "user"
    # An unknown (or another tenant's) id is a 404 before the body is even looked at.
    assert (await client.post("/v1/conversations/conv_nope/save")).status_code == 404


def remember_call(content: str, **extra: Any) -> dict[str, Any]:
    return {"name": "remember", "arguments": {"content": content, **extra}}


async def test_llm_triggered_remember_tool_is_handled_and_hidden(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        "fake-model",
        [
            {"tool_calls": [remember_call("Prefers window seats", memory_type="preference",
                                          importance=8)]},
            {"content": "Noted, a window seat it is."},
        ],
    )  # fmt: skip
    result = await chat(
        client, "Book me a flight; I always take the window.", user="lia",
        context={"memory_extraction": "llm_triggered"},
    )  # fmt: skip
    message = result["choices"][0]["message"]
    assert message["content"] == "Noted, a window seat it is."
    assert "tool_calls" not in message or not message["tool_calls"]
    assert result["choices"][0]["finish_reason"] == "stop"
    [memory] = (await client.get("/v1/memories", params={"user": "lia"})).json()["data"]
    assert (memory["content"], memory["memory_type"], memory["importance"]) == (
        "Prefers window seats", "preference", 8,
    )  # fmt: skip
    assert memory["source"] == "llm_triggered"
    assert result["context_utilization"]["memories_remembered"] == [memory["id"]]

    first, second = upstream_chats(fake_upstream)
    assert [t["function"]["name"] for t in first["tools"]] == ["remember"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "remember"
    assert second["messages"][-1]["content"] == f"Remembered ({memory['id']})."
    assert result["usage"]["prompt_tokens"] > first_prompt_tokens(first)  # both rounds counted
    detail = (await client.get(f"/v1/conversations/{result['conversation_id']}")).json()
    assert [(m["role"], m["content"]) for m in detail["messages"]] == [
        ("user", "Book me a flight; I always take the window."),
        ("assistant", "Noted, a window seat it is."),
    ]

    # Without the mode (or without a user) no tool is added.
    await chat(client, "hello", user="lia")
    assert "tools" not in upstream_chats(fake_upstream)[-1]


def first_prompt_tokens(body: dict[str, Any]) -> int:
    return sum(len(str(m.get("content") or "")) // 4 + 4 for m in body["messages"])


async def test_llm_triggered_keeps_the_clients_own_tool_calls(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        "fake-model",
        [{"tool_calls": [remember_call("Lives in Lyon"), {"name": "weather", "arguments": {}}]}],
    )
    body = {
        "model": "fake-model",
        "user": "max",
        "messages": [{"role": "user", "content": "I live in Lyon. Weather?"}],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": {}}}],
        "context": {"memory_extraction": "llm_triggered"},
    }
    result = (await client.post("/v1/chat/completions", json=body)).json()
    calls = result["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["weather"]
    assert result["choices"][0]["finish_reason"] == "tool_calls"
    assert await contents(client, "max") == ["Lives in Lyon"]
    [sent] = upstream_chats(fake_upstream)
    assert [t["function"]["name"] for t in sent["tools"]] == ["weather", "remember"]


async def test_llm_triggered_streaming_hides_the_tool_round(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        "fake-model",
        [{"tool_calls": [remember_call("Vegetarian")]}, {"content": "Here is a veggie menu."}],
    )
    body = {
        "model": "fake-model",
        "user": "noa",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "I am vegetarian. Dinner ideas?"}],
        "context": {"memory_extraction": "llm_triggered"},
    }
    chunks = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(orjson.loads(line[6:]))
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    assert text == "Here is a veggie menu."
    assert not any(c["choices"][0]["delta"].get("tool_calls") for c in chunks if c.get("choices"))
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]
    assert [f for f in finishes if f] == ["stop"]
    usages = [c["usage"] for c in chunks if c.get("usage")]
    assert len(usages) == 1
    assert usages[0]["prompt_tokens"] > 0
    assert await contents(client, "noa") == ["Vegetarian"]
    metadata = chunks[-1]
    assert metadata["context_utilization"]["memories_remembered"]
    assert len(upstream_chats(fake_upstream)) == 2


async def test_llm_triggered_stops_after_the_last_round_without_leaking_the_tool(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(remember_max_rounds=1))
    fake_upstream.script(
        "fake-model",
        [
            {"tool_calls": [remember_call("Speaks Finnish")]},
            {"content": "Selvä.", "tool_calls": [remember_call("Lives in Turku")]},
        ],
    )
    result = await chat(
        client, "I speak Finnish and live in Turku.", user="ola",
        context={"memory_extraction": "llm_triggered"},
    )  # fmt: skip
    choice = result["choices"][0]
    assert choice["message"]["content"] == "Selvä."
    assert not choice["message"].get("tool_calls")
    assert choice["finish_reason"] == "stop"
    assert await contents(client, "ola") == ["Lives in Turku", "Speaks Finnish"]
    assert len(upstream_chats(fake_upstream)) == 2  # one extra round at most
    assert all(
        [t["function"]["name"] for t in call["tools"]] == ["remember"]
        for call in upstream_chats(fake_upstream)
    )
