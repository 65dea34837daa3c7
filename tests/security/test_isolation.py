"""Tenant isolation matrix: two virtual keys, every endpoint, every id type.

Routes are discovered from the app's OpenAPI schema (built from ``app.routes``), so an endpoint
added later is covered or makes this test fail until it is: someone else's id answers 404, and
the resource is still there for its owner afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.core.settings import Settings

MASTER = "sk-master-isolation-0123456789"
USER = "alice"
PARAM = re.compile(r"\{(\w+)\}")
ADMIN_ONLY = {"key_id"}  # /v1/keys/{key_id}: 403 for every virtual key
# Paths without an id and how they are checked below (list/scoped queries).
KNOWN_COLLECTIONS = {
    "/v1/chat/completions",
    "/v1/conversations",
    "/v1/memories",
    "/v1/attachments",
    "/v1/keys",
    "/health",
    "/ready",
    "/v1/models",
    # The other doors and embeddings: checked in test_other_doors_cannot_reach_another_tenant.
    "/v1/responses",
    "/v1/responses/compact",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/embeddings",
}


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def world(client_for: Any, make_settings: Callable[..., Settings]) -> dict[str, Any]:
    client: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    keys = {}
    for name in ("a", "b"):
        response = await client.post("/v1/keys", json={"name": name}, headers=_auth(MASTER))
        keys[name] = response.json()
    a = _auth(keys["a"]["key"])
    chat = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "user": USER,
            "messages": [
                {"role": "system", "content": "shared system prompt"},
                {"role": "user", "content": "tenant a's question"},
            ],
        },
        headers=a,
    )
    assert chat.status_code == 200, chat.text
    ids: dict[str, str] = {
        "conversation_id": chat.json()["conversation_id"],
        "key_id": keys["a"]["id"],
    }
    attachment = await client.post(
        "/v1/attachments", json={"content": "tenant a's document", "title": "doc"}, headers=a
    )
    if attachment.status_code != 404:
        assert attachment.status_code in (200, 201), attachment.text
        ids["attachment_id"] = attachment.json()["id"]
    memory = await client.post(
        "/v1/memories",
        json={"user": USER, "content": "alice likes tea", "memory_type": "preference"},
        headers=a,
    )
    if memory.status_code != 404:
        assert memory.status_code in (200, 201), memory.text
        ids["memory_id"] = memory.json()["id"]
    response = await client.post(
        "/v1/responses", json={"model": "gpt-4o-mini", "input": "tenant a's task"}, headers=a
    )
    assert response.status_code == 200, response.text
    ids["response_id"] = response.json()["id"]
    schema = (await client.get("/openapi.json")).json()
    return {"client": client, "a": a, "b": _auth(keys["b"]["key"]), "ids": ids, "schema": schema}


def _routes(schema: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    ]


async def test_every_id_of_another_tenant_is_404(world: dict[str, Any]) -> None:
    client: httpx.AsyncClient = world["client"]
    ids: dict[str, str] = world["ids"]
    covered = []
    for method, path in _routes(world["schema"]):
        params = PARAM.findall(path)
        if not params:
            assert path in KNOWN_COLLECTIONS, f"{method} {path}: add it to the isolation matrix"
            continue
        missing = [p for p in params if p not in ids]
        assert not missing, f"{method} {path}: no fixture creates a {missing} yet"
        url = PARAM.sub(lambda m: ids[m.group(1)], path)
        response = await client.request(method, url, headers=world["b"], params={"user": USER})
        expected = 403 if set(params) & ADMIN_ONLY else 404
        assert response.status_code == expected, (method, path, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"
        covered.append((method, path))
    # Nothing of A's was touched by B's attempts (B's DELETEs included).
    for method, path in covered:
        if method == "GET" and not set(PARAM.findall(path)) & ADMIN_ONLY:
            url = PARAM.sub(lambda m: ids[m.group(1)], path)
            owner = await client.get(url, headers=world["a"])
            assert owner.status_code == 200, (path, owner.text)
    assert ("GET", "/v1/conversations/{conversation_id}") in covered


async def test_collections_and_queries_never_cross_tenants(world: dict[str, Any]) -> None:
    client: httpx.AsyncClient = world["client"]
    a, b, ids = world["a"], world["b"], world["ids"]
    assert (await client.get("/v1/conversations", headers=b)).json()["data"] == []
    # A's chat conversation and the one its response started.
    assert len((await client.get("/v1/conversations", headers=a)).json()["data"]) == 2
    if "memory_id" in ids:
        listed = await client.get("/v1/memories", params={"user": USER}, headers=b)
        assert listed.json()["data"] == []
        forgotten = await client.delete("/v1/memories", params={"user": USER}, headers=b)
        assert forgotten.status_code == 200
        assert forgotten.json().get("deleted") == 0
        mine = await client.get("/v1/memories", params={"user": USER}, headers=a)
        assert [m["id"] for m in mine.json()["data"]] == [ids["memory_id"]]


async def test_chat_cannot_reach_another_tenants_ids_or_history(world: dict[str, Any]) -> None:
    client: httpx.AsyncClient = world["client"]
    b, ids = world["b"], world["ids"]
    base = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    foreign = await client.post(
        "/v1/chat/completions", json={**base, "conversation_id": ids["conversation_id"]}, headers=b
    )
    assert foreign.status_code == 404, foreign.text
    header = await client.post(
        "/v1/chat/completions",
        json=base,
        headers={**b, "X-Conversation-Id": ids["conversation_id"]},
    )
    assert header.status_code == 404, header.text
    if "attachment_id" in ids:
        attached = await client.post(
            "/v1/chat/completions",
            json={**base, "attachments": [{"attachment_id": ids["attachment_id"]}]},
            headers=b,
        )
        assert attached.status_code in (400, 404), attached.text
    # Prefix matching is per tenant: the same leading messages start B's own conversation.
    same = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "user": USER,  # same end-user name: A's memories of alice stay A's
            "messages": [
                {"role": "system", "content": "shared system prompt"},
                {"role": "user", "content": "tenant a's question"},
                {"role": "assistant", "content": "Echo: tenant a's question"},
                {"role": "user", "content": "next"},
            ],
        },
        headers=b,
    )
    assert same.status_code == 200
    assert same.json()["conversation_id"] != ids["conversation_id"]
    assert same.json()["context_utilization"]["memories_injected"] == []


async def test_other_doors_cannot_reach_another_tenant(world: dict[str, Any]) -> None:
    client: httpx.AsyncClient = world["client"]
    a, b, ids = world["a"], world["b"], world["ids"]
    # B cannot continue (or branch from) A's response, by id or through its conversation.
    continued = await client.post(
        "/v1/responses",
        json={"model": "gpt-4o-mini", "input": "and?", "previous_response_id": ids["response_id"]},
        headers=b,
    )
    assert continued.status_code == 404, continued.text
    by_conversation = await client.post(
        "/v1/messages",
        json={
            "model": "gpt-4o-mini",
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "what did a ask?"}],
        },
        headers={**b, "X-Conversation-Id": ids["conversation_id"]},
    )
    assert by_conversation.status_code == 404, by_conversation.text
    assert by_conversation.json()["type"] == "error"  # Anthropic's envelope on its door
    # Neither touched A's records.
    assert (await client.get(f"/v1/responses/{ids['response_id']}", headers=a)).status_code == 200
    history = await client.get(f"/v1/conversations/{ids['conversation_id']}", headers=a)
    assert [m["role"] for m in history.json()["messages"]] == ["system", "user", "assistant"]
    # B can neither compact A's response nor go on from A's compaction item.
    compact = await client.post(
        "/v1/responses/compact",
        json={"model": "gpt-4o-mini", "previous_response_id": ids["response_id"]},
        headers=b,
    )
    assert compact.status_code == 404, compact.text
    own = await client.post(
        "/v1/responses/compact", json={"model": "gpt-4o-mini", "input": "a's secret"}, headers=a
    )
    item = own.json()["output"][-1]
    assert item["type"] == "compaction"
    stolen = await client.post(
        "/v1/responses",
        json={"model": "gpt-4o-mini", "input": [item, {"role": "user", "content": "and?"}]},
        headers=b,
    )
    assert stolen.status_code == 400, stolen.text
    assert stolen.json()["error"]["code"] == "invalid_compaction_item"
