"""The memory API, injection for the right user only, extraction in the background."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import chat, drain, upstream_chats


async def add(client: httpx.AsyncClient, user: str, content: str, **extra: Any) -> dict[str, Any]:
    body = {"user": user, "content": content, "memory_type": "preference", "importance": 8}
    response = await client.post("/v1/memories", json={**body, **extra})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def last_user_text(fake: FakeUpstream) -> str:
    messages = upstream_chats(fake)[-1]["messages"]
    return str([m for m in messages if m["role"] == "user"][-1]["content"])


async def test_memory_is_injected_for_its_user_only_and_not_after_delete(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    memory = await add(client, "alice", "Alice drinks green tea every morning")
    assert memory["id"].startswith("mem_")
    assert memory["user"] == "alice"

    result = await chat(client, "What tea should I brew?", user="alice", system="Be brief.")
    sent = upstream_chats(fake_upstream)[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}  # system prompt untouched
    text = last_user_text(fake_upstream)
    assert text.startswith("[CONTEXT: ")
    assert (
        "Relevant memories:\n- [preference, importance 8, just now] "
        "Alice drinks green tea every morning\n\nWhat tea should I brew?"
    ) in text
    injected = result["context_utilization"]["memories_injected"]
    assert [m["id"] for m in injected] == [memory["id"]]
    assert injected[0]["score"] > 0
    assert result["context_utilization"]["breakdown"]["memory"] > 0
    # The stored message is the user's own text.
    detail = (await client.get(f"/v1/conversations/{result['conversation_id']}")).json()
    assert detail["messages"][1]["content"] == "What tea should I brew?"

    await chat(client, "What tea should I brew?", user="bob")
    assert last_user_text(fake_upstream) == "What tea should I brew?"

    await chat(client, "Which tea?", user="alice", context={"memory": False})
    assert last_user_text(fake_upstream) == "Which tea?"

    deleted = await client.delete(f"/v1/memories/{memory['id']}")
    assert deleted.json() == {"id": memory["id"], "object": "memory.deleted", "deleted": True}
    result = await chat(client, "What tea should I brew now?", user="alice")
    # Alice's earlier conversations may be recalled (once their vectors, written in the
    # background, are stored): a recalled block, which may quote the fake's echo of the first
    # prompt, memory and all; but no memory block of this request.
    text = last_user_text(fake_upstream)
    assert not text.startswith("[CONTEXT")
    assert text == "What tea should I brew now?" or text.endswith("\n\nWhat tea should I brew now?")
    assert "Relevant memories:\n" not in text.split("[/RECALLED]")[-1]
    assert result["context_utilization"]["memories_injected"] == []
    assert (await client.delete(f"/v1/memories/{memory['id']}")).status_code == 404


async def test_injection_modes_end_to_end(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    await add(client, "carol", "Carol writes Rust at work")
    await chat(
        client,
        "Which programming language does Carol use at work?",
        user="carol",
        system="S.",
        context={"memory_injection": "system_append"},
    )
    sent = upstream_chats(fake_upstream)[-1]["messages"]
    assert sent[0]["content"].startswith("S.\n\n[CONTEXT: ")
    await chat(
        client,
        "Which programming language does Carol use at work, again?",
        user="carol",
        context={"memory_injection": "context_message"},
    )
    sent = upstream_chats(fake_upstream)[-1]["messages"]
    assert sent[-2]["role"] == "system"
    assert "Carol writes Rust" in sent[-2]["content"]
    assert sent[-1] == {
        "role": "user",
        "content": "Which programming language does Carol use at work, again?",
    }


async def test_memory_api_lists_restates_supersedes_and_forgets(
    client: httpx.AsyncClient,
) -> None:
    first = await add(client, "dan", "Dan lives in Paris")
    same = await add(client, "dan", "Dan lives in paris", importance=9)
    assert same["id"] == first["id"]
    assert same["importance"] == 9
    moved = await add(client, "dan", "Dan moved to Berlin", supersedes=[first["id"]])
    await add(client, "erin", "Erin likes jazz")

    listed = (await client.get("/v1/memories", params={"user": "dan"})).json()
    assert [m["id"] for m in listed["data"]] == [moved["id"]]
    everything = (
        await client.get("/v1/memories", params={"user": "dan", "include_superseded": True})
    ).json()
    old = next(m for m in everything["data"] if m["id"] == first["id"])
    assert old["superseded_by"] == moved["id"]

    forgotten = (await client.delete("/v1/memories", params={"user": "dan"})).json()
    assert forgotten == {"user": "dan", "object": "memory.forgotten", "deleted": 2}
    assert (await client.get("/v1/memories", params={"user": "dan"})).json()["data"] == []
    assert len((await client.get("/v1/memories", params={"user": "erin"})).json()["data"]) == 1
    bad = await client.post("/v1/memories", json={"user": "x", "content": "y", "importance": 11})
    assert bad.status_code in (400, 422)
    assert "error" in bad.json()
    assert (await client.get("/v1/memories")).status_code in (400, 422)


async def test_memories_are_tenant_scoped(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> None:
    client = await client_for(make_settings(master_key="sk-master"))
    admin = {"Authorization": "Bearer sk-master"}
    keys = []
    for name in ("a", "b"):
        response = await client.post("/v1/keys", json={"name": name}, headers=admin)
        assert response.status_code in (200, 201), response.text
        keys.append({"Authorization": f"Bearer {response.json()['key']}"})
    body = {"user": "alice", "content": "Secret of tenant A", "memory_type": "fact"}
    created = (await client.post("/v1/memories", json=body, headers=keys[0])).json()
    seen_by_b = await client.get("/v1/memories", params={"user": "alice"}, headers=keys[1])
    assert seen_by_b.json()["data"] == []
    assert (
        await client.delete(f"/v1/memories/{created['id']}", headers=keys[1])
    ).status_code == 404
    forgot = await client.delete("/v1/memories", params={"user": "alice"}, headers=keys[1])
    assert forgot.json()["deleted"] == 0
    seen_by_a = await client.get("/v1/memories", params={"user": "alice"}, headers=keys[0])
    assert [m["id"] for m in seen_by_a.json()["data"]] == [created["id"]]
    assert (await client.get("/v1/memories", params={"user": "alice"})).status_code == 401


async def test_extraction_every_turn_stores_and_supersedes(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(summarizer_model="fake-summarizer"))
    old = await add(client, "frank", "Frank works at Initech")
    extracted = {
        "memories": [
            {
                "content": "Frank now works at Globex",
                "memory_type": "fact",
                "importance": 7,
                "supersedes": [old["id"], "mem_not_shown"],
            },
            {"content": "Frank prefers short answers", "memory_type": "preference"},
        ]
    }
    fake_upstream.script("fake-summarizer", [orjson.dumps(extracted).decode()])
    result = await chat(
        client,
        "I left Initech, I work at Globex now.",
        user="frank",
        context={"memory_extraction": "every_turn"},
    )
    assert result["choices"][0]["message"]["content"].startswith("Echo:")
    await drain(client)
    calls = [r for r in fake_upstream.requests() if r["body"].get("model") == "fake-summarizer"]
    assert len(calls) == 1
    prompt = calls[0]["body"]["messages"][1]["content"]
    assert old["id"] in prompt
    assert "I left Initech" in prompt
    assert calls[0]["body"]["response_format"] == {"type": "json_object"}
    memories = (await client.get("/v1/memories", params={"user": "frank"})).json()["data"]
    assert sorted(m["content"] for m in memories) == [
        "Frank now works at Globex",
        "Frank prefers short answers",
    ]
    assert all(m["source"] == "extraction" for m in memories)

    # periodic (every 5 turns by default) and off do not call the extractor on turn 1
    await chat(client, "hello there", user="gina")
    await chat(client, "hello again", user="gina", context={"memory_extraction": "off"})
    await drain(client)
    calls = [r for r in fake_upstream.requests() if r["body"].get("model") == "fake-summarizer"]
    assert len(calls) == 1


async def test_embeddings_retrieval_when_configured(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(embedding_model="fake-embed"))
    memory = await add(client, "hana", "Hana keeps bees on the roof")
    await add(client, "hana", "Hana drives a red car")
    embeds = [r for r in fake_upstream.requests() if r["path"].endswith("/embeddings")]
    assert len(embeds) == 2
    result = await chat(client, "how are the bees on the roof", user="hana")
    injected = result["context_utilization"]["memories_injected"]
    assert injected[0]["id"] == memory["id"]
    embeds = [r for r in fake_upstream.requests() if r["path"].endswith("/embeddings")]
    assert len(embeds) == 3  # the query
