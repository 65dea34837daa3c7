"""Limits on every endpoint: a key's rpm counts every authenticated request (not only chat),
and per-tenant storage quotas (attachment bytes, memories) answer 413 / 429."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant
from fastapi.routing import APIRoute

from app.core.settings import Settings
from app.keys.auth import get_caller

MASTER = "sk-master-limits-1234567890"


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _uses_caller(dependant: Dependant) -> bool:
    return dependant.call is get_caller or any(_uses_caller(d) for d in dependant.dependencies)


def test_the_caller_dependency_solves_nothing_below_it() -> None:
    """``CallerDep`` reads the state itself: FastAPI solves no nested dependency for it on
    every authenticated request."""
    assert get_dependant(path="/", call=get_caller).dependencies == []


def _api_routes(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """Every APIRoute, through included routers (FastAPI keeps them nested)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
        elif hasattr(route, "original_router"):
            yield from _api_routes(
                route.original_router.routes, prefix + route.include_context.prefix
            )


def _authenticated_routes(client: httpx.AsyncClient) -> list[tuple[str, str]]:
    app = client._transport.app  # type: ignore[attr-defined]
    found = []
    for path, route in _api_routes(app.routes):
        if path.startswith("/v1"):
            assert _uses_caller(route.dependant), f"{path} does not authenticate"
            for method in sorted(route.methods - {"HEAD"}):
                found.append((method, path))
    return found


@pytest.fixture
async def admin(client_for: Any, make_settings: Callable[..., Settings]) -> httpx.AsyncClient:
    client: httpx.AsyncClient = await client_for(
        make_settings(master_key=MASTER, tenant_max_attachment_bytes=100, tenant_max_memories=2)
    )
    client.headers.update(_auth(MASTER))
    return client


async def _issue(admin: httpx.AsyncClient, **fields: Any) -> str:
    response = await admin.post("/v1/keys", json={"name": "k", **fields})
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


async def test_rpm_applies_to_every_authenticated_endpoint(admin: httpx.AsyncClient) -> None:
    routes = _authenticated_routes(admin)
    paths = {path for _, path in routes}
    # the doors and the stores (others join as they are added: every /v1 route must qualify)
    assert {"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings",
            "/v1/attachments", "/v1/memories", "/v1/conversations", "/v1/keys",
            "/v1/models"} <= paths  # fmt: skip
    for method, path in routes:
        key = await _issue(admin, rpm_limit=2)
        url = path.replace("{", "").replace("}", "")  # any id: a 404 still counts
        query = {"user": "u"} if "memories" in path else None
        statuses = []
        for _ in range(3):
            response = await admin.request(method, url, params=query, json={}, headers=_auth(key))
            statuses.append(response.status_code)
        assert statuses[:2] != [429, 429], (method, path, statuses)
        assert statuses[2] == 429, (method, path, statuses, response.text)
        error = response.json()["error"]
        if path.startswith("/v1/messages"):  # Anthropic's envelope: no code, a type
            assert response.json()["type"] == "error"
            assert error["type"] == "rate_limit_error"
        else:
            assert error["code"] == "rate_limit_exceeded"
        assert 1 <= int(response.headers["retry-after"]) <= 60


async def test_the_master_key_and_unlimited_keys_are_not_counted(admin: httpx.AsyncClient) -> None:
    key = await _issue(admin)
    for _ in range(5):
        assert (await admin.get("/v1/conversations", headers=_auth(key))).status_code == 200
        assert (await admin.get("/v1/conversations")).status_code == 200


async def test_attachment_bytes_quota_is_413_and_nothing_is_stored(
    admin: httpx.AsyncClient,
) -> None:
    first = await admin.post("/v1/attachments", json={"content": "a" * 60})
    assert first.status_code == 201, first.text
    again = await admin.post("/v1/attachments", json={"content": "a" * 60})
    assert again.status_code == 200  # the same text is not stored twice: no quota used
    over = await admin.post("/v1/attachments", json={"content": "b" * 60})
    assert over.status_code == 413, over.text
    error = over.json()["error"]
    assert error["code"] == "attachment_quota_exceeded"
    assert "quota of 100 bytes" in error["message"]
    # another tenant has its own quota
    other = await _issue(admin)
    elsewhere = await admin.post(
        "/v1/attachments", json={"content": "b" * 60}, headers=_auth(other)
    )
    assert elsewhere.status_code == 201
    # deleting makes room
    deleted = await admin.delete(f"/v1/attachments/{first.json()['id']}")
    assert deleted.status_code == 200
    assert (await admin.post("/v1/attachments", json={"content": "b" * 60})).status_code == 201


async def test_memories_quota_is_429_and_restatements_still_update(
    admin: httpx.AsyncClient,
) -> None:
    for text in ("Ada likes tea", "Ada lives in Paris"):
        assert (
            await admin.post("/v1/memories", json={"user": "ada", "content": text})
        ).status_code == 200
    over = await admin.post("/v1/memories", json={"user": "bob", "content": "Bob plays chess"})
    assert over.status_code == 429, over.text
    assert over.json()["error"]["code"] == "memory_quota_exceeded"
    assert "quota" in over.json()["error"]["message"]
    restated = await admin.post("/v1/memories", json={"user": "ada", "content": "Ada likes tea"})
    assert restated.status_code == 200
    listed = await admin.get("/v1/memories", params={"user": "bob"})
    assert listed.json()["data"] == []
    ada = (await admin.get("/v1/memories", params={"user": "ada"})).json()["data"]
    assert len(ada) == 2
