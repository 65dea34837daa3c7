"""`contextgate serve --workers 2` with Redis: a key's rpm limit holds across the workers
(one sliding window in Redis), while both workers answer requests."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import httpx
import pytest

from tests.scale.test_workers import _cpu_ticks, _workers
from tests.support.proxy import ContextgateServer

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

MASTER = "sk-master-rpm-workers-0123456789"
LIMIT = 12
REQUESTS = 36


async def test_rpm_limit_holds_across_two_workers_through_redis(
    start_proxy: Callable[..., ContextgateServer], redis_url: str
) -> None:
    server = start_proxy(
        {"CONTEXTGATE_MASTER_KEY": MASTER, "CONTEXTGATE_REDIS_URL": redis_url}, workers=2
    )
    workers = _workers(server)
    assert len(workers) == 2, workers
    # The kernel hands a burst's connections to whichever worker accepts first; now and then one
    # worker takes a whole burst (more often on a loaded machine: make test runs its PostgreSQL
    # pass beside the SQLite one). A burst served by both, with the limit exact, is the proof:
    # up to six bursts, each with a fresh key (its own window), every one with the limit exact.
    for attempt in range(6):
        statuses, busy, ticks = await _burst(server, workers, f"limited-{attempt}")
        assert statuses == {200: LIMIT, 429: REQUESTS - LIMIT}
        if busy == workers:
            break
        await asyncio.sleep(0.5)
    assert busy == workers, ticks


async def _burst(
    server: ContextgateServer, workers: list[int], name: str
) -> tuple[Counter[int], list[int], dict[int, int]]:
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as admin:
        created = await admin.post(
            "/v1/keys",
            json={"name": name, "rpm_limit": LIMIT},
            headers={"Authorization": f"Bearer {MASTER}"},
        )
    assert created.status_code == 201, created.text
    key = created.json()["key"]
    before = {pid: _cpu_ticks(pid) for pid in workers}

    async def one(index: int) -> int:
        # A connection per request, so that the kernel hands them to both workers' accept().
        async with httpx.AsyncClient(base_url=server.base_url, trust_env=False) as client:
            response = await client.post(
                "/chat/completions",
                json={"model": "fake-model", "messages": [{"role": "user", "content": f"{index}"}]},
                headers={"Authorization": f"Bearer {key}"},
                timeout=60,
            )
        if response.status_code == 429:
            assert response.json()["error"]["code"] == "rate_limit_exceeded"
            assert int(response.headers["retry-after"]) >= 1
        return response.status_code

    statuses = Counter(await asyncio.gather(*(one(i) for i in range(REQUESTS))))
    busy = [pid for pid in workers if _cpu_ticks(pid) - before[pid] >= 3]
    print(f"rpm across 2 workers through Redis: {dict(statuses)} (limit {LIMIT}/min)")
    return statuses, busy, {pid: _cpu_ticks(pid) - before[pid] for pid in workers}
