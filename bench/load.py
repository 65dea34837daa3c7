"""Load generator, run as its own process so it does not share a CPU core's event loop with
the server under test:

    python -m bench.load --url http://127.0.0.1:PORT/v1 --concurrency 8 --requests 400 \
        [--stream] [--conversation] [--duration 20] [--model bench-model]

Prints one JSON object on stdout: latencies (ms) p50/p90/p99/mean, time to first byte for
streams, throughput (requests/s over the measured window), error count and the client's own
CPU time. ``--conversation``: each client first starts a conversation (not measured), then
every measured request continues it by ``conversation_id`` with one short user message.
Loopback only; bounded by ``--requests`` and ``--duration``, whichever comes first.

The client is aiohttp (C HTTP parser): on a 2-core machine every millisecond of CPU the
load generator spends per request is taken from the server under test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values) if values else float("nan"),
        "n": len(values),
    }


class Load:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.endpoint = args.url.rstrip("/") + "/chat/completions"
        self.latencies: list[float] = []
        self.ttfb: list[float] = []
        self.errors = 0
        self.last_error = ""
        self.remaining = args.requests
        self.deadline = 0.0
        self.started = 0
        self.all_started = asyncio.Event()

    def body(self, worker: int, turn: int, conversation_id: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.args.model,
            "messages": [{"role": "user", "content": f"hello {worker} turn {turn}"}],
            "max_tokens": 16,
        }
        if self.args.stream:
            body["stream"] = True
        if conversation_id:
            body["conversation_id"] = conversation_id
        return body

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = repr(exc)[:300]

    async def send(self, session: aiohttp.ClientSession, body: dict[str, Any]) -> str | None:
        """Send one request, record its timings; return the conversation id it answered with
        (``x-conversation-id`` header, else a non-streamed body's ``conversation_id``).
        Raises on a transport error or a status other than 200."""
        stream = bool(body.get("stream"))
        started = time.perf_counter()
        async with session.post(self.endpoint, json=body) as response:
            if stream:
                first = None
                async for _chunk in response.content.iter_any():
                    if first is None:
                        first = time.perf_counter()
                raw = b""
            else:
                raw = await response.read()
            if response.status != 200:
                text = raw[:200].decode(errors="replace")
                raise RuntimeError(f"HTTP {response.status}: {text}")
            done = time.perf_counter()
            if stream:
                self.ttfb.append(((first or done) - started) * 1000)
            self.latencies.append((done - started) * 1000)
            answered = response.headers.get("x-conversation-id")
        if answered is None and raw and self.args.conversation:
            answered = json.loads(raw).get("conversation_id")
        return str(answered) if answered else None

    async def one(self, session: aiohttp.ClientSession, body: dict[str, Any]) -> str | None:
        try:
            return await self.send(session, body)
        except Exception as exc:
            self.failed(exc)
            return None

    async def worker(
        self, session: aiohttp.ClientSession, worker: int, ready: asyncio.Event
    ) -> None:
        conversation_id = None
        if self.args.conversation:
            start = self.body(worker, 0, None)
            start.pop("stream", None)
            try:  # not measured: run() clears the timings once every client has started
                conversation_id = await self.send(session, start)
            except Exception as exc:
                self.failed(exc)
        self.started += 1
        if self.started == self.args.concurrency:
            self.all_started.set()
        await ready.wait()
        turn = 1
        rotate = self.args.turns_per_conversation
        while self.remaining > 0 and time.perf_counter() < self.deadline:
            self.remaining -= 1
            if self.args.conversation and rotate and turn % rotate == 0:
                conversation_id = None  # a fresh conversation, then continued again
            answered = await self.one(session, self.body(worker, turn, conversation_id))
            if self.args.conversation and conversation_id is None:
                conversation_id = answered
            turn += 1

    async def run(self) -> dict[str, Any]:
        connector = aiohttp.TCPConnector(limit=self.args.concurrency + 4, keepalive_timeout=60.0)
        timeout = aiohttp.ClientTimeout(total=60.0)
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, trust_env=False
        ) as session:
            # Warm-up: connections opened, server caches filled; not measured.
            for index in range(self.args.warmup):
                await self.one(session, self.body(10_000 + index, 0, None))
            self.errors = 0
            ready = asyncio.Event()
            self.deadline = time.perf_counter() + 3600
            tasks = [
                asyncio.create_task(self.worker(session, index, ready))
                for index in range(self.args.concurrency)
            ]
            # Conversations are started before the clock starts.
            await self.all_started.wait()
            self.latencies.clear()
            self.ttfb.clear()
            cpu_start = time.process_time()
            started = time.perf_counter()
            self.deadline = started + self.args.duration
            ready.set()
            await asyncio.gather(*tasks)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu_start
        done = len(self.latencies)
        return {
            "latency_ms": summary(self.latencies),
            "ttfb_ms": summary(self.ttfb),
            "throughput_rps": done / elapsed if elapsed > 0 else 0.0,
            "elapsed_s": elapsed,
            "errors": self.errors,
            "last_error": self.last_error,
            "client_cpu_s": cpu,
            "concurrency": self.args.concurrency,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load")
    parser.add_argument("--url", required=True, help="base URL ending in /v1")
    parser.add_argument("--model", default="bench-model")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--conversation", action="store_true")
    parser.add_argument(
        "--turns-per-conversation",
        type=int,
        default=0,
        help="with --conversation: start a new conversation every N turns (0: never)",
    )
    args = parser.parse_args(argv)
    runner: Callable[[Coroutine[Any, Any, dict[str, Any]]], dict[str, Any]] = asyncio.run
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        pass
    os.environ.setdefault("PYTHONHASHSEED", "0")
    result = runner(Load(args).run())
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
