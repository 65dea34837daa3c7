"""Virtual keys: issued by the master key, shown once, stored hashed, revocable; per-key limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream

MASTER = "sk-master-test-1234567890"
BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def admin(client_for: Any, make_settings: Callable[..., Settings]) -> httpx.AsyncClient:
    client: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    client.headers.update(_auth(MASTER))
    return client


async def _issue(admin: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    response = await admin.post("/v1/keys", json={"name": "k", **fields})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_issue_list_revoke(admin: httpx.AsyncClient, sqlite_url: str) -> None:
    issued = await _issue(admin, name="svc", max_budget=5, rpm_limit=60)
    assert issued["key"].startswith("sk-cg-")
    assert issued["id"].startswith("key_")
    listed = (await admin.get("/v1/keys")).json()["data"]
    assert [k["id"] for k in listed] == [issued["id"]]
    assert "key" not in listed[0]  # shown once
    assert listed[0]["key_prefix"].startswith("sk-cg-")
    # Stored hashed: the key itself is nowhere in the database file.
    engine = create_engine(sqlite_url.replace("+aiosqlite", ""))
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM api_keys")).all()
    engine.dispose()
    assert all(issued["key"] not in str(value) for row in rows for value in row)
    ok = await admin.post("/v1/chat/completions", json=BODY, headers=_auth(issued["key"]))
    assert ok.status_code == 200, ok.text
    deleted = await admin.delete(f"/v1/keys/{issued['id']}")
    assert deleted.json() == {"id": issued["id"], "object": "api_key.deleted", "deleted": True}
    revoked = await admin.post("/v1/chat/completions", json=BODY, headers=_auth(issued["key"]))
    assert revoked.status_code == 401
    assert revoked.json()["error"]["code"] == "invalid_api_key"
    assert (await admin.delete(f"/v1/keys/{issued['id']}")).status_code == 404


async def test_only_the_master_key_manages_keys(admin: httpx.AsyncClient) -> None:
    key = (await _issue(admin))["key"]
    for method, path in [("POST", "/v1/keys"), ("GET", "/v1/keys"), ("DELETE", "/v1/keys/x")]:
        response = await admin.request(method, path, json={"name": "x"}, headers=_auth(key))
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    missing = await admin.get("/v1/keys", headers={"Authorization": ""})
    assert missing.status_code == 401


async def test_keys_need_a_master_key(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/keys", json={"name": "x"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "master_key_required"


async def test_rpm_limit_answers_429_with_retry_after(admin: httpx.AsyncClient) -> None:
    key = (await _issue(admin, rpm_limit=3))["key"]
    statuses = []
    for _ in range(4):
        response = await admin.post("/v1/chat/completions", json=BODY, headers=_auth(key))
        statuses.append(response.status_code)
    assert statuses == [200, 200, 200, 429]
    assert 1 <= int(response.headers["retry-after"]) <= 60
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    other = (await _issue(admin, rpm_limit=3))["key"]  # limits are per key
    assert (
        await admin.post("/v1/chat/completions", json=BODY, headers=_auth(other))
    ).status_code == 200


@pytest.mark.redis
async def test_rpm_limit_shared_through_redis(
    client_for: Any, make_settings: Callable[..., Settings], redis_url: str
) -> None:
    settings = make_settings(master_key=MASTER, redis_url=redis_url)
    first: httpx.AsyncClient = await client_for(settings)
    second: httpx.AsyncClient = await client_for(settings)  # another replica, same Redis
    created = await first.post(
        "/v1/keys", json={"name": "r", "rpm_limit": 2}, headers=_auth(MASTER)
    )
    key = created.json()["key"]
    results = [
        (await replica.post("/v1/chat/completions", json=BODY, headers=_auth(key))).status_code
        for replica in (first, second, second)
    ]
    assert results == [200, 200, 429]


async def test_budget_exhausted_is_insufficient_quota(
    admin: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    # gpt-4o-mini has a price in litellm's map, so every request costs something.
    key = (await _issue(admin, max_budget=0.0))["key"]
    response = await admin.post("/v1/chat/completions", json=BODY, headers=_auth(key))
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "insufficient_quota"
    assert fake_upstream.stats()["calls"] == 0


async def test_concurrent_requests_overspend_by_at_most_one(
    admin: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    probe = (await _issue(admin))["key"]
    one = await admin.post("/v1/chat/completions", json=BODY, headers=_auth(probe))
    cost = one.json()["cost"]["total_cost"]
    assert cost > 0
    budget = cost * 3.5
    key = (await _issue(admin, max_budget=budget))["key"]
    fake_upstream.faults("*", [{"delay_ms": 50}] * 40)
    responses = await asyncio.gather(
        *[admin.post("/v1/chat/completions", json=BODY, headers=_auth(key)) for _ in range(20)]
    )
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(ok) + len(refused) == 20
    spent = sum(r.json()["cost"]["total_cost"] for r in ok)
    assert spent <= budget + cost * 1.0001  # at most one request beyond the budget
    assert all(r.json()["error"]["code"] == "insufficient_quota" for r in refused)
