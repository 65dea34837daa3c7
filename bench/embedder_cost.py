"""``python -m bench.embedder_cost [--requests 400] [--concurrency 8]``: what the embedded
embedder costs a busy server.

One ``contextgate serve`` (one worker, SQLite) per embedder (``bm25``: no embeddings;
``wordllama``; ``minilm``) in front of the fake upstream; the same continued conversations
(``bench.load --conversation``, short user turns, the fake's echo as answers), each turn's
messages embedded in the background for message recall. Reports throughput, p50 latency and
the server's CPU per request (the background embedding included: it is the process tree's CPU
over the run, drained before the reading). Twice: anonymous requests (short conversations
recall never searches: nothing is embedded), and with a ``user`` (the user's other
conversations may search them: every message is embedded).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.services import WORK, Contextgate, cpu_seconds

EMBEDDERS = ("bm25", "wordllama", "minilm")


def measure(
    upstream: str, embedder: str, requests: int, concurrency: int, user: bool
) -> dict[str, float]:
    WORK.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix=f"embedder-{embedder}-", dir=WORK))
    database = f"sqlite+aiosqlite:///{logs / 'cg.db'}"
    env = {"CONTEXTGATE_EMBEDDER": embedder}
    with Contextgate(logs, upstream, database, extra_env=env) as server:
        command = [
            sys.executable, "-m", "bench.load", "--url", server.base_url,
            "--concurrency", str(concurrency), "--requests", str(requests),
            "--duration", "120", "--warmup", "10", "--conversation",
        ]  # fmt: skip
        if user:
            command += ["--user", "bench-user"]
        before = cpu_seconds(server.pid)
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
        time.sleep(2.0)  # the last turns' background embeddings
        cpu = cpu_seconds(server.pid) - before
    result = json.loads(done.stdout)
    # every request the server answered: the measured ones, the warm-up, the conversation starts
    total = round(result["throughput_rps"] * result["elapsed_s"]) + 10 + concurrency
    return {
        "throughput_rps": result["throughput_rps"],
        "p50_ms": result["latency_ms"]["p50"],
        "server_cpu_ms_per_request": 1000 * cpu / max(total, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    from tests.fake_upstream import FakeUpstream

    rows = {}
    with FakeUpstream() as fake:
        for user in (False, True):
            for embedder in EMBEDDERS:
                rows[(user, embedder)] = measure(
                    fake.base_url, embedder, args.requests, args.concurrency, user
                )
    print("| requests | embedder | throughput (req/s) | p50 (ms) | server CPU per request (ms) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for (user, embedder), row in rows.items():
        print(
            f"| {'with `user`' if user else 'anonymous'} | {embedder} | "
            f"{row['throughput_rps']:.1f} | {row['p50_ms']:.1f} | "
            f"{row['server_cpu_ms_per_request']:.1f} |"
        )


if __name__ == "__main__":
    main()
