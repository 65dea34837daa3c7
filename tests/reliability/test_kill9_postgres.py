"""kill -9 on PostgreSQL: a server killed mid-flight under concurrent load (half of the
requests streamed) loses no turn it acknowledged. The SQLite twin is in test_server_e2e.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from tests.reliability.test_server_e2e import _acked_worker
from tests.support.proxy import ContextgateServer

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ACKED = 120


async def test_kill_9_on_postgres_loses_no_acknowledged_turn(
    start_proxy: Callable[..., ContextgateServer], postgres_database_url: str
) -> None:
    env = {"CONTEXTGATE_DATABASE_URL": postgres_database_url}
    server = start_proxy(env)
    acked: list[tuple[str, str]] = []
    async with httpx.AsyncClient(
        base_url=server.url, timeout=30, limits=httpx.Limits(max_connections=32)
    ) as http:
        workers = [asyncio.create_task(_acked_worker(http, w, acked)) for w in range(12)]
        while len(acked) < ACKED:
            await asyncio.sleep(0.05)
        server.stop(kill=True)  # SIGKILL, mid-flight
        await asyncio.gather(*workers)
    assert len(acked) >= ACKED
    server.start()
    lost = []
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        for conversation_id, marker in acked:
            response = await http.get(f"/v1/conversations/{conversation_id}")
            messages = response.json().get("messages", []) if response.status_code == 200 else []
            complete = (
                messages
                and marker in messages[0]["content"]
                and messages[-1]["role"] == "assistant"
                and messages[-1]["status"] == "complete"
                and messages[-1]["content"].startswith(f"Echo: {marker}")
            )
            if not complete:
                lost.append((conversation_id, marker, response.status_code))
    print(f"kill -9 on PostgreSQL: {len(acked)} acknowledged turns, {len(lost)} lost")
    assert lost == []
