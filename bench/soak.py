"""Soak: many concurrent streams against the real server and the fake upstream, for minutes.

    python -m bench.soak [--duration 300] [--concurrency 200] [--warmup 60] [--pool-size 10]

Every worker loops: one streamed chat completion (a new conversation, ~40 words paced by the
fake upstream), read to ``data: [DONE]``. Measured: non-2xx and broken streams (the goal is
zero), the server's RSS after warm-up vs at the end (goal: growth < 10%), and the SQLite
connections the server holds open (file descriptors on the database file; goal: within the
pool, pool_size + max_overflow). Prints a markdown table and writes bench/results/soak.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.services import BENCH, Contextgate, rss_mib, tree_pids
from tests.fake_upstream import FakeUpstream

WORDS = " ".join(f"w{i}" for i in range(40))


def db_connections(root: int, db_path: Path) -> int:
    """Open file descriptors on the database file itself (one per SQLite connection)."""
    target = str(db_path.resolve())
    count = 0
    for pid in tree_pids(root):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    count += 1
            except OSError:
                continue
    return count


class Soak:
    def __init__(self, args: argparse.Namespace, base_url: str) -> None:
        self.args = args
        self.base_url = base_url
        self.ok = 0
        self.non_2xx = 0
        self.broken = 0
        self.errors: dict[str, int] = {}
        self.stop_at = 0.0

    async def worker(self, client: httpx.AsyncClient, index: int) -> None:
        content = f'{WORDS}\nFAULT:{{"chunk_delay_ms": {self.args.chunk_delay_ms}}}'
        body = {
            "model": "soak-model",
            "stream": True,
            "messages": [{"role": "user", "content": content}],
            "user": f"soak-{index}",
        }
        while time.monotonic() < self.stop_at:
            try:
                async with client.stream("POST", "/chat/completions", json=body) as response:
                    if not 200 <= response.status_code < 300:
                        self.non_2xx += 1
                        await response.aread()
                        continue
                    last = ""
                    async for line in response.aiter_lines():
                        if line:
                            last = line
                    if last == "data: [DONE]":
                        self.ok += 1
                    else:
                        self.broken += 1
            except httpx.HTTPError as exc:
                name = type(exc).__name__
                self.errors[name] = self.errors.get(name, 0) + 1

    async def run(self, server_pid: int, db_path: Path) -> dict[str, Any]:
        args = self.args
        limits = httpx.Limits(max_connections=args.concurrency + 10, max_keepalive_connections=0)
        samples: list[tuple[float, float, int]] = []
        async with httpx.AsyncClient(
            base_url=self.base_url, timeout=120, limits=limits, trust_env=False
        ) as client:
            started = time.monotonic()
            self.stop_at = started + args.duration
            workers = [asyncio.create_task(self.worker(client, i)) for i in range(args.concurrency)]
            while time.monotonic() < self.stop_at:
                await asyncio.sleep(args.sample_s)
                samples.append(
                    (
                        time.monotonic() - started,
                        rss_mib(server_pid),
                        db_connections(server_pid, db_path),
                    )
                )
            await asyncio.gather(*workers)
            elapsed = time.monotonic() - started
        after_warmup = [s for s in samples if s[0] >= args.warmup] or samples
        rss_start, rss_end = after_warmup[0][1], samples[-1][1]
        return {
            "duration_s": round(elapsed, 1),
            "concurrency": args.concurrency,
            "streams_ok": self.ok,
            "non_2xx": self.non_2xx,
            "broken_streams": self.broken,
            "client_errors": self.errors,
            "streams_per_s": round(self.ok / elapsed, 1),
            "rss_after_warmup_mib": round(rss_start, 1),
            "rss_end_mib": round(rss_end, 1),
            "rss_max_mib": round(max(s[1] for s in samples), 1),
            "rss_growth_pct": round((rss_end - rss_start) / rss_start * 100, 2),
            "db_connections_max": max(s[2] for s in samples),
            "db_pool_limit": 2 * args.pool_size,
            "samples": [
                {"t": round(t, 1), "rss_mib": round(r, 1), "db_fds": c} for t, r, c in samples
            ],
        }


def table(result: dict[str, Any]) -> str:
    ok = (
        result["non_2xx"] == 0
        and result["broken_streams"] == 0
        and not result["client_errors"]
        and result["rss_growth_pct"] < 10
        and result["db_connections_max"] <= result["db_pool_limit"]
    )
    rows = [
        ("duration", f"{result['duration_s']} s"),
        ("concurrent streams", result["concurrency"]),
        ("streams completed", f"{result['streams_ok']} ({result['streams_per_s']}/s)"),
        ("non-2xx / broken streams / client errors",
         f"{result['non_2xx']} / {result['broken_streams']} / {result['client_errors'] or 0}"),
        ("server RSS after warm-up → end (max)",
         f"{result['rss_after_warmup_mib']} → {result['rss_end_mib']} MiB "
         f"({result['rss_max_mib']} max)"),
        ("RSS growth after warm-up", f"{result['rss_growth_pct']}%"),
        ("SQLite connections held (max) / pool limit",
         f"{result['db_connections_max']} / {result['db_pool_limit']}"),
        ("verdict", "pass" if ok else "FAIL"),
    ]  # fmt: skip
    lines = ["| measure | value |", "| --- | --- |"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds before the baseline")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--chunk-delay-ms", type=int, default=20)
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--max-retries", type=int, default=2)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "soak.json")
    args = parser.parse_args()
    args.warmup = min(args.warmup, args.duration / 3)
    with tempfile.TemporaryDirectory(prefix="contextgate-soak-") as tmp:
        work = Path(tmp)
        db_path = work / "soak.db"
        with FakeUpstream() as upstream:
            server = Contextgate(
                work,
                upstream.base_url,
                f"sqlite+aiosqlite:///{db_path}",
                extra_env={
                    "CONTEXTGATE_DB_POOL_SIZE": str(args.pool_size),
                    # The product default (bench.services turns retries off for latency runs).
                    "CONTEXTGATE_MAX_RETRIES": str(args.max_retries),
                },
            )
            with server:
                soak = Soak(args, server.base_url)
                result = asyncio.run(soak.run(server.pid, db_path))
            log = server.log_path.read_text(errors="replace")
            (BENCH / ".work").mkdir(exist_ok=True)
            (BENCH / ".work" / "soak-server.log").write_text(log)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(table(result))


if __name__ == "__main__":
    main()
