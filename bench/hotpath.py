"""Time contextgate's hot path in-process, without a profiler:

    python -m bench.hotpath [--requests 400] [--rounds 3]

Continues small conversations (a new one every 25 turns, as ``bench.run`` does) through the
ASGI app against the fake upstream on a fresh SQLite file and prints, per request, the median
wall and CPU time (non-streaming) and the median time to the first streamed byte. A narrow
harness for before/after comparisons of one change; ``bench.run`` remains the reference.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time

from bench.inprocess import inprocess_app, turn  # also: offline defaults before litellm


async def _turns(client: object, requests: int, stream: bool) -> tuple[float, float, float]:
    """(wall ms per request, CPU ms per request, median ms to the first byte)."""
    conversation_id: str | None = None
    firsts: list[float] = []
    cpu = time.process_time()
    started = time.perf_counter()
    for index in range(requests):
        if index % 25 == 0:
            conversation_id = None
        body = turn(f"hello turn {index}", conversation_id, stream=stream)
        sent = time.perf_counter()
        async with client.stream("POST", "/chat/completions", json=body) as response:  # type: ignore[attr-defined]
            response.raise_for_status()
            first = True
            async for _chunk in response.aiter_raw():
                if first:
                    firsts.append((time.perf_counter() - sent) * 1000)
                    first = False
        conversation_id = response.headers["x-conversation-id"]
    wall = (time.perf_counter() - started) * 1000 / requests
    return wall, (time.process_time() - cpu) * 1000 / requests, statistics.median(firsts)


async def drive(base_url: str, db_url: str, requests: int, rounds: int) -> None:
    async with inprocess_app(base_url, db_url) as (_, client):
        await _turns(client, 40, False)  # warm-up
        await _turns(client, 40, True)
        plain: list[tuple[float, float, float]] = []
        streamed: list[tuple[float, float, float]] = []
        for _ in range(rounds):
            plain.append(await _turns(client, requests, False))
            streamed.append(await _turns(client, requests // 2, True))
    wall = statistics.median(p[0] for p in plain)
    cpu = statistics.median(p[1] for p in plain)
    ttfb = statistics.median(s[2] for s in streamed)
    print(f"non-streaming: {wall:.2f} ms wall, {cpu:.2f} ms CPU per request (in-process)")
    print(f"streaming: first byte after {ttfb:.2f} ms (median)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hotpath")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from tests.fake_upstream import FakeUpstream

    with FakeUpstream() as fake, tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite+aiosqlite:///{tmp}/hotpath.db"
        asyncio.run(drive(fake.base_url, db_url, args.requests, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
