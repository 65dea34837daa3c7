"""PostgreSQL going away under a running server: requests fail in the door's envelope with a
status a client retries (503, Retry-After), /ready says so, nothing half-stored, and the
server serves again by itself when the database is back (no restart)."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import httpx
import pytest

from tests.support.proxy import ContextgateServer

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

MODEL = "gpt-4o-mini"


async def _admin(url: str, *statements: str) -> None:
    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    name = dsn.rsplit("/", 1)[1]
    connection = await asyncpg.connect(dsn.rsplit("/", 1)[0] + "/postgres", timeout=10)
    try:
        for statement in statements:
            await connection.execute(statement.format(db=name))
    finally:
        await connection.close()


CUT = (
    'ALTER DATABASE "{db}" ALLOW_CONNECTIONS false',
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = '{db}' AND pid <> pg_backend_pid()",
)
RESTORE = ('ALTER DATABASE "{db}" ALLOW_CONNECTIONS true',)


def _chat(text: str) -> dict[str, object]:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}]}


async def _conversation_count(http: httpx.AsyncClient) -> int:
    listed = await http.get("/v1/conversations", params={"limit": 100})
    assert listed.status_code == 200, listed.text
    return len(listed.json()["data"])


async def test_database_outage_then_recovery(
    start_proxy: Callable[..., ContextgateServer], postgres_database_url: str
) -> None:
    server = start_proxy({"CONTEXTGATE_DATABASE_URL": postgres_database_url})
    # one keep-alive connection throughout: an error must not reset it
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        before = await http.post("/v1/chat/completions", json=_chat("before"))
        assert before.status_code == 200, before.text
        stored = await _conversation_count(http)

        # PostgreSQL restarted under us: pooled connections die, new ones are accepted.
        await _admin(postgres_database_url, CUT[1])
        survived = await http.post("/v1/chat/completions", json=_chat("after a restart"))
        assert survived.status_code == 200, survived.text  # pre-ping reconnects

        await _admin(postgres_database_url, *CUT)  # down: no connection accepted
        try:
            chat = await http.post("/v1/chat/completions", json=_chat("during"))
            streamed = await http.post(
                "/v1/chat/completions", json={**_chat("during"), "stream": True}
            )
            anthropic = await http.post("/v1/messages", json={**_chat("during"), "max_tokens": 9})
            listed = await http.get("/v1/conversations")
            ready = await http.get("/ready")
            health = await http.get("/health")
        finally:
            await _admin(postgres_database_url, *RESTORE)

        for response in (chat, streamed, listed):
            assert response.status_code == 503, response.text
            assert response.headers["retry-after"] == "1"
            error = response.json()["error"]
            assert error["code"] == "database_unavailable"
            assert error["type"] == "server_error"
        assert anthropic.status_code == 503
        assert anthropic.json()["error"]["type"] == "overloaded_error"  # Anthropic's envelope
        assert ready.status_code == 503
        assert health.status_code == 200  # liveness: the process is fine

        after = await http.post("/v1/chat/completions", json=_chat("after"))
        assert after.status_code == 200, after.text  # back by itself, no restart
        assert await _conversation_count(http) == stored + 2  # nothing half-stored
