"""Keys that expire, failed-auth throttling per client address (/v1 and /ui/login), and an
inspector session that expires and ends at logout and at a master-key rotation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.core.database import create_database
from app.core.settings import Settings
from app.db.models import ApiKey, UiSession
from tests.support.cli import invoke_on

MASTER = "sk-master-hardening-123456"


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _app(client: httpx.AsyncClient) -> Any:
    return client._transport.app  # type: ignore[attr-defined]


async def _expire(client: httpx.AsyncClient, model: Any, row_id: str | None = None) -> None:
    """Move an expiry into the past (as time would), straight in the database."""
    state = _app(client).state.contextgate
    statement = update(model).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
    if row_id is not None:
        statement = statement.where(model.id == row_id)
    async with state.database.writing() as session:
        await session.execute(statement)


async def test_a_key_with_expires_at_works_until_then_and_answers_401_after(
    client_for: Any, make_settings: Callable[..., Settings]
) -> None:
    admin: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    admin.headers.update(_auth(MASTER))
    past = await admin.post("/v1/keys", json={"name": "p", "expires_at": "2020-01-01T00:00:00Z"})
    assert past.status_code == 400
    assert "future" in past.json()["error"]["message"]
    naive = await admin.post("/v1/keys", json={"name": "n", "expires_at": "2099-01-01T00:00:00"})
    assert naive.status_code == 400  # a moment without a zone is ambiguous
    when = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    made = await admin.post("/v1/keys", json={"name": "t", "expires_at": when.isoformat()})
    assert made.status_code == 201, made.text
    assert made.json()["expires_at"] == when.isoformat().replace("+00:00", "Z")
    listed = (await admin.get("/v1/keys")).json()["data"]
    assert listed[0]["expires_at"] == made.json()["expires_at"]
    key = made.json()["key"]
    assert (await admin.get("/v1/conversations", headers=_auth(key))).status_code == 200
    await _expire(admin, ApiKey, made.json()["id"])
    expired = await admin.get("/v1/conversations", headers=_auth(key))
    assert expired.status_code == 401
    assert expired.json()["error"]["code"] == "expired_api_key"
    assert "expired at" in expired.json()["error"]["message"]
    never = await admin.post("/v1/keys", json={"name": "forever"})
    assert never.json()["expires_at"] is None
    assert (await admin.get("/v1/models", headers=_auth(never.json()["key"]))).status_code == 200


async def test_cli_creates_and_lists_keys_with_their_expiry(sqlite_url: str) -> None:
    code, output = await asyncio.to_thread(
        invoke_on, sqlite_url, "keys", "create", "temp", "--expires-at", "2099-05-01T12:00:00Z"
    )
    assert code == 0, output
    soon = (datetime.now(UTC) + timedelta(days=3)).replace(second=0, microsecond=0)
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    for name, when in (("soon", soon.isoformat()), ("gone", later)):
        code, output = await asyncio.to_thread(
            invoke_on, sqlite_url, "keys", "create", name, "--expires-at", when
        )
        assert code == 0, output
    database = create_database(sqlite_url, pool_size=1)
    try:  # "gone" expires (as time would), straight in the database
        async with database.writing() as session:
            past = datetime.now(UTC) - timedelta(hours=1)
            await session.execute(
                update(ApiKey).where(ApiKey.name == "gone").values(expires_at=past)
            )
    finally:
        await database.dispose()
    code, output = await asyncio.to_thread(invoke_on, sqlite_url, "keys", "list")
    assert code == 0, output
    rows = {line.split()[3]: line for line in output.splitlines() if "key_" in line}
    assert set(rows) == {"temp", "soon", "gone"}, output
    assert "2099-05-01 12:00:00 UTC" in rows["temp"]
    assert f"{soon:%Y-%m-%d %H:%M:%S} UTC" in rows["soon"]
    assert "(expired)" in rows["gone"]
    assert output.count("(expired)") == 1, output
    code, output = await asyncio.to_thread(
        invoke_on, sqlite_url, "keys", "create", "old", "--expires-at", "2001-01-01T00:00:00Z"
    )
    assert code == 2
    assert "future" in output
    code, output = await asyncio.to_thread(invoke_on, sqlite_url, "doctor")
    expected = (
        "3 virtual keys, 1 expired, 2 with an expiry; "
        f"1 expire within 7 days (first {soon:%Y-%m-%d %H:%M} UTC)"
    )
    assert expected in output, output


async def test_failed_auth_is_throttled_per_address_with_retry_after(
    client_for: Any, make_settings: Callable[..., Settings]
) -> None:
    client: httpx.AsyncClient = await client_for(
        make_settings(master_key=MASTER, auth_max_failures=3)
    )
    statuses = [
        (await client.get("/v1/conversations", headers=_auth(f"sk-guess-{n}"))).status_code
        for n in range(3)
    ]
    assert statuses == [401, 401, 401]
    blocked = await client.get("/v1/conversations", headers=_auth("sk-guess-4"))
    assert blocked.status_code == 429
    assert blocked.json()["error"]["code"] == "too_many_auth_failures"
    assert 1 <= int(blocked.headers["retry-after"]) <= 60
    # Blocked before any key is checked: the right key does not get through either.
    assert (await client.get("/v1/conversations", headers=_auth(MASTER))).status_code == 429
    assert (await client.get("/v1/models")).status_code == 429
    # Another address is not affected.
    other = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_app(client), client=("10.1.2.3", 4000)),
        base_url="http://contextgate",
    )
    async with other:
        assert (await other.get("/v1/conversations", headers=_auth(MASTER))).status_code == 200


async def test_ui_login_is_throttled_too(
    client_for: Any, make_settings: Callable[..., Settings]
) -> None:
    client: httpx.AsyncClient = await client_for(
        make_settings(master_key=MASTER, auth_max_failures=2)
    )
    for _ in range(2):
        wrong = await client.post("/ui/login", data={"key": "nope", "next": "/ui"})
        assert wrong.status_code == 401
    blocked = await client.post("/ui/login", data={"key": "nope", "next": "/ui"})
    assert blocked.status_code == 429
    assert (await client.post("/ui/login", data={"key": MASTER})).status_code == 429
    assert int(blocked.headers["retry-after"]) >= 1
    assert "Too many failed" in blocked.text
    assert "set-cookie" not in blocked.headers
    # ?key= on any page counts the same way
    assert (await client.get("/ui", params={"key": MASTER})).status_code == 429


async def _login(client: httpx.AsyncClient) -> str:
    response = await client.post("/ui/login", data={"key": MASTER, "next": "/ui"})
    assert response.status_code == 303, response.text
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "Max-Age=3600" in cookie
    return str(response.cookies["contextgate_ui"])


async def test_ui_session_expires_ends_at_logout_and_at_master_key_rotation(
    client_for: Any, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(master_key=MASTER, ui_session_ttl_s=3600)
    client: httpx.AsyncClient = await client_for(settings)

    async def page(token: str, on: httpx.AsyncClient = client) -> int:
        on.cookies.clear()
        return (await on.get("/ui", cookies={"contextgate_ui": token})).status_code

    token = await _login(client)
    assert await page(token) == 200
    assert await page("forged-token") == 401
    # logout ends the session on the server: the same cookie, replayed, opens nothing
    client.cookies.set("contextgate_ui", token, path="/ui")
    assert (await client.get("/ui/logout")).status_code == 303
    assert await page(token) == 401
    # expiry
    token = await _login(client)
    assert await page(token) == 200
    await _expire(client, UiSession)
    assert await page(token) == 401
    # rotating the master key: the same database, a new key
    token = await _login(client)
    assert await page(token) == 200
    rotated: httpx.AsyncClient = await client_for(
        make_settings(master_key="sk-master-rotated-654321", ui_session_ttl_s=3600)
    )
    assert await page(token, rotated) == 401


@pytest.mark.redis
async def test_failed_auth_is_counted_across_replicas_through_redis(
    client_for: Any, make_settings: Callable[..., Settings], redis_url: str
) -> None:
    settings = make_settings(master_key=MASTER, redis_url=redis_url, auth_max_failures=2)
    first: httpx.AsyncClient = await client_for(settings)
    second: httpx.AsyncClient = await client_for(settings)  # another replica, same Redis
    assert (await first.get("/v1/models", headers=_auth("sk-guess-1"))).status_code == 401
    assert (await second.get("/v1/models", headers=_auth("sk-guess-2"))).status_code == 401
    # the third failure, on either replica, is over the shared count
    blocked = await second.get("/v1/models", headers=_auth("sk-guess-3"))
    assert blocked.status_code == 429
    assert blocked.json()["error"]["code"] == "too_many_auth_failures"
    assert (await second.get("/v1/models", headers=_auth(MASTER))).status_code == 429
