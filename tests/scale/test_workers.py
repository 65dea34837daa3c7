"""`contextgate serve --workers 2`: two worker processes, and both of them answer."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

REQUESTS = 48


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _is_worker(pid: int) -> bool:
    return b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _workers(server: ContextgateServer) -> list[int]:
    """The worker processes, once every one of them has finished its start-up: /health answers
    as soon as the first is up, and a burst sent before the second is would all go to one."""
    assert server.process is not None
    assert server.log_path is not None
    deadline = time.monotonic() + 120
    expected = len([c for c in _children(server.process.pid) if _is_worker(c)])
    while server.log_path.read_text(errors="replace").count("Application startup complete") < (
        expected
    ):
        assert time.monotonic() < deadline, server.tail()
        time.sleep(0.1)
    # multiprocessing's resource tracker is a child too, not a worker
    return [pid for pid in _children(server.process.pid) if _is_worker(pid)]


async def test_two_workers_serve_requests(start_proxy: Callable[..., ContextgateServer]) -> None:
    server = start_proxy(workers=2)
    workers = _workers(server)
    assert len(workers) == 2, workers

    async def one(index: int) -> str:
        # A connection per request, so that the kernel hands them to both workers' accept().
        async with httpx.AsyncClient(base_url=server.base_url, trust_env=False) as client:
            response = await client.post(
                "/chat/completions",
                json={
                    "model": "fake-model",
                    "messages": [{"role": "user", "content": f"n{index}"}],
                },
                timeout=60,
            )
        assert response.status_code == 200, response.text
        return str(response.json()["choices"][0]["message"]["content"])

    # Now and then one worker accepts a whole burst (more often on a loaded machine): up to six
    # bursts, every answer right, until one is served by both.
    for attempt in range(6):
        before = {pid: _cpu_ticks(pid) for pid in workers}
        first = attempt * REQUESTS
        answers = await asyncio.gather(*(one(first + i) for i in range(REQUESTS)))
        assert answers == [f"Echo: n{first + i}" for i in range(REQUESTS)]
        ticks = {pid: _cpu_ticks(pid) - before[pid] for pid in workers}
        busy = [pid for pid in workers if ticks[pid] >= 5]  # >= 50 ms of CPU
        if busy == workers:
            break
        await asyncio.sleep(0.5)
    assert busy == workers, ticks
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as client:
        assert (await client.get("/ready")).status_code == 200
