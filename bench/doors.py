"""``python -m bench.doors [--rounds 3] [--record]``: the Anthropic and Responses doors against
the chat door.

One contextgate (``contextgate serve``, one worker, SQLite in bench/.work/) in front of the fake
upstream; the same model (an OpenAI-compatible upstream) asked through
``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses`` with the same short
conversation turns, continued by id (``bench.load --door``), interleaved round by round so
machine noise hits all alike:

- added latency, concurrency 1: p50 of the door minus p50 of the fake upstream called directly;
- streaming TTFB, concurrency 8: p50 time to the first body bytes.

The goal (issue 13): each figure of /v1/messages and of /v1/responses within 1.2x of
/v1/chat/completions'.
``--record`` writes the table into bench/README.md between this bench's own markers.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.services import WORK, Contextgate

BENCH = Path(__file__).resolve().parent
START = "<!-- doors-results:start (written by python -m bench.doors --record) -->"
END = "<!-- doors-results:end -->"
SECTION = "## Doors: /v1/messages and /v1/responses against /v1/chat/completions"
DOORS = ("chat", "messages", "responses")
GOAL = 1.2


def load(
    url: str, door: str, *, concurrency: int, requests: int, stream: bool, conversation: bool
) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "bench.load", "--url", url, "--door", door,
        "--concurrency", str(concurrency), "--requests", str(requests),
        "--duration", "15", "--warmup", "10",
    ]  # fmt: skip
    if stream:
        command.append("--stream")
    if conversation:
        command += ["--conversation", "--turns-per-conversation", "25"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"load ({door}) failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    if result["errors"]:
        raise RuntimeError(f"load ({door}): {result['errors']} errors: {result['last_error']}")
    return result


def measure(upstream: str, contextgate: str, rounds: int, requests: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}
    for index in range(rounds):
        direct = load(
            upstream, "chat", concurrency=1, requests=requests, stream=False, conversation=False
        )
        base = direct["latency_ms"]["p50"]
        for door in DOORS:
            c1 = load(
                contextgate, door, concurrency=1, requests=requests, stream=False, conversation=True
            )
            c8 = load(
                contextgate,
                door,
                concurrency=8,
                requests=requests * 2,
                stream=True,
                conversation=True,
            )
            added = c1["latency_ms"]["p50"] - base
            ttfb = c8["ttfb_ms"]["p50"]
            figures.setdefault(f"{door}_added", []).append(added)
            figures.setdefault(f"{door}_ttfb", []).append(ttfb)
            print(
                f"  round {index + 1} {door:<9} added p50 {added:6.2f} ms  ttfb p50 {ttfb:6.2f} ms",
                flush=True,
            )
    return figures


def render(figures: dict[str, list[float]], rounds: int, requests: int) -> str:
    def median(key: str) -> float:
        return statistics.median(figures[key])

    rows = []
    labels = (
        ("added latency p50, concurrency 1 (ms)", "added"),
        ("streaming TTFB p50, concurrency 8 (ms)", "ttfb"),
    )
    for label, key in labels:
        chat = median(f"chat_{key}")
        for door in DOORS[1:]:
            value = median(f"{door}_{key}")
            ratio = value / chat if chat > 0 else float("nan")
            met = "yes" if ratio <= GOAL else "no"
            rows.append(
                f"| {label} | /v1/{door} | {chat:.2f} | {value:.2f} | {ratio:.2f} "
                f"| ≤ {GOAL} × | {met} |"
            )
    return "\n".join(
        [
            f"Median of {rounds} interleaved rounds, {requests} requests per latency run "
            f"({2 * requests} per stream run), conversations continued by id "
            "(`python -m bench.doors`).",
            "",
            "| figure | door | /v1/chat/completions | the door | ratio | goal | met |",
            "| --- | --- | ---: | ---: | ---: | --- | --- |",
            *rows,
        ]
    )


def record(readme: Path, markdown: str) -> None:
    text = readme.read_text()
    block = f"{START}\n{markdown}\n{END}"
    if START in text and END in text:
        text = re.sub(
            re.escape(START) + r".*?" + re.escape(END), lambda _m: block, text, flags=re.S
        )
    else:
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\n{block}\n"
    readme.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.doors", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="doors-", dir=WORK))
    from tests.fake_upstream import FakeUpstream

    with FakeUpstream() as fake:
        service = Contextgate(logs, fake.base_url, f"sqlite+aiosqlite:///{logs}/contextgate.db")
        with service:
            figures = measure(fake.base_url, service.base_url, args.rounds, args.requests)
    markdown = render(figures, args.rounds, args.requests)
    print()
    print(markdown)
    if args.record:
        record(BENCH / "README.md", markdown)
        print(f"recorded in {BENCH / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
