"""``python -m bench.run [--quick] [--record] [--no-litellm] [--no-workers] [--no-curve]
[--workers-only]``: the speed goals.

Sets up everything itself on loopback: the fake upstream (tests/fake_upstream), contextgate
(``contextgate serve``, one worker, SQLite in bench/.work/), LiteLLM proxy 1.106 from the
package registry in a throwaway venv (bench/.work/litellm-venv; no database, no master key,
one worker) and, for the scale-out figure, contextgate with ``--workers 1`` and ``--workers 2``
on SQLite and, when installed, PostgreSQL (``--workers-only``: just that figure). Load comes
from ``python -m bench.load`` (asyncio + httptools, its own process). Every scenario runs
against every target side by side, in ``--rounds`` interleaved rounds (median of rounds), so
machine noise hits all alike. Prints one table of the goals as ratios, issue 2's figures, the
history-length curve (PNG: bench/history_curve.png); ``--record`` writes them into
bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import report
from bench.services import (
    ANTHROPIC_MODEL,
    WORK,
    Contextgate,
    LiteLLMProxy,
    RssSampler,
    Service,
    cpu_seconds,
    ensure_litellm,
    rss_mib,
)

BENCH = Path(__file__).resolve().parent
SIZES = [10, 100, 1_000, 10_000]
TURNS_PER_CONVERSATION = 25  # small conversations: ~50 stored messages at most


@dataclass
class Plan:
    rounds: int
    c1_requests: int
    c32_requests: int
    stream_requests: int
    duration_s: float
    assembly_repeats: int
    agent_calls: int = 8  # measured calls per agent task (bench/agent_calls.py)
    # Concurrency 1 is measured in this many blocks per round, every target back to back in
    # each: its ratio, the median of the blocks' own, is not moved by a machine that speeds up
    # or slows down between one target's run and the next (seen: 2x within minutes).
    c1_blocks: int = 3


FULL = Plan(rounds=3, c1_requests=300, c32_requests=2400, stream_requests=800, duration_s=15.0,
            assembly_repeats=15, agent_calls=8)  # fmt: skip
QUICK = Plan(rounds=1, c1_requests=120, c32_requests=800, stream_requests=240, duration_s=8.0,
             assembly_repeats=3, agent_calls=5, c1_blocks=1)  # fmt: skip
# An agent's model has a window its 150k-token prompt fits in (contextgate's default is 8k).
AGENT_WINDOW = "200000"


@dataclass
class Target:
    name: str
    url: str
    conversation: bool
    service: Service | None = None
    sampler: RssSampler | None = None
    idle_rss: float = float("nan")
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def run_load(target: Target, concurrency: int, requests: int, duration: float,
             *, stream: bool = False) -> dict[str, Any]:  # fmt: skip
    command = [
        sys.executable, "-m", "bench.load", "--url", target.url,
        "--concurrency", str(concurrency), "--requests", str(requests),
        "--duration", str(duration), "--warmup", "10",
    ]  # fmt: skip
    if stream:
        command.append("--stream")
    if target.conversation:
        command += ["--conversation", "--turns-per-conversation", str(TURNS_PER_CONVERSATION)]
    pid = target.service.pid if target.service else None
    cpu_before = cpu_seconds(pid) if pid else 0.0
    done = subprocess.run(command, capture_output=True, text=True, timeout=duration * 4 + 120)
    if done.returncode != 0:
        raise RuntimeError(f"load against {target.name} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    if pid:  # CPU the server spent per measured request (warm-up included: ~1%)
        requests_done = max(1, result["latency_ms"]["n"])
        result["server_cpu_ms"] = (cpu_seconds(pid) - cpu_before) * 1000 / requests_done
    if result["errors"]:
        print(f"  ! {target.name}: {result['errors']} errors, last: {result['last_error']}")
    return result


SCENARIOS: list[tuple[str, int, bool]] = [
    ("c1", 1, False),
    ("c32", 32, False),
    ("stream_c8", 8, True),
]


def scenario_requests(plan: Plan, key: str) -> int:
    return {"c1": plan.c1_requests, "c32": plan.c32_requests}.get(key, plan.stream_requests)


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram_gib = float("nan")
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gib = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "ram_gib": round(ram_gib, 1),
        "python": platform.python_version(),
        "load_before": os.getloadavg(),
    }


def median_of(rounds: list[dict[str, Any]], *path: str) -> float:
    values = []
    for result in rounds:
        value: Any = result
        for key in path:
            value = value[key]
        values.append(float(value))
    return statistics.median(values) if values else float("nan")


def measure_targets(targets: list[Target], plan: Plan) -> None:
    """Each round: every scenario, every target one after the other (concurrency 1 in
    ``plan.c1_blocks`` blocks); each result appended to ``target.results[scenario]``, so the
    i-th results of the targets were measured side by side."""
    for round_index in range(plan.rounds):
        for key, concurrency, stream in SCENARIOS:
            blocks = plan.c1_blocks if key == "c1" else 1
            for target in (target for _ in range(blocks) for target in targets):
                result = run_load(
                    target, concurrency, scenario_requests(plan, key), plan.duration_s,
                    stream=stream,
                )  # fmt: skip
                target.results.setdefault(key, []).append(result)
                print(
                    f"  round {round_index + 1} {key:<9} {target.name:<14} "
                    f"p50 {result['latency_ms']['p50']:7.2f} ms  "
                    f"ttfb {result['ttfb_ms']['p50']:7.2f} ms  "
                    f"{result['throughput_rps']:7.1f} req/s",
                    flush=True,
                )


def start(service: Service, name: str) -> Service:
    print(f"starting {name} ...", flush=True)
    service.start()
    print(f"  ready in {service.ready_s:.2f} s, RSS {rss_mib(service.pid):.0f} MiB", flush=True)
    return service


def compile_app() -> None:
    """Byte-compile contextgate as an install does (pip, the Dockerfile): LiteLLM proxy runs
    from a pip-installed venv, and a checkout under ``PYTHONDONTWRITEBYTECODE`` would otherwise
    compile every module at each start (0.15-0.4 s of its ready time)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "app", "migrations"],
        cwd=BENCH.parent,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def warm(upstream: str) -> None:
    """One answer from the fake upstream before any target starts: its own first answer
    (~0.1 s) would otherwise count in the first target's ready time only."""
    body = {"model": "warm-up", "messages": [{"role": "user", "content": "hi"}]}
    httpx.post(f"{upstream}/chat/completions", json=body, timeout=30.0, trust_env=False)


def compare_targets(
    logs: Path, fake: Any, plan: Plan, *, litellm: bool, agent: bool = True
) -> dict[str, Any]:
    """Every scenario against the fake upstream directly, contextgate and LiteLLM proxy."""
    upstream = fake.base_url
    results: dict[str, Any] = {}
    direct = Target("direct", upstream, conversation=False)
    services: list[Service] = []
    try:
        contextgate = start(
            Contextgate(
                logs, upstream, f"sqlite+aiosqlite:///{logs}/contextgate.db",
                extra_env={"CONTEXTGATE_DEFAULT_CONTEXT_WINDOW": AGENT_WINDOW},
            ),
            "contextgate (1 worker)",
        )  # fmt: skip
        services.append(contextgate)
        cg = Target("contextgate", contextgate.base_url, True, contextgate)
        targets = [direct, cg]
        if litellm:
            proxy = start(LiteLLMProxy(logs, upstream), "LiteLLM proxy (1 worker)")
            services.append(proxy)
            targets.append(Target("litellm", proxy.base_url, False, proxy))
        for target in targets:
            if target.service is not None:
                target.idle_rss = rss_mib(target.service.pid)
                target.sampler = RssSampler(target.service.pid).__enter__()
        measure_targets(targets, plan)
        for target in targets:
            if target.sampler is not None:
                target.sampler.__exit__(None, None, None)
        if agent:
            results["agent"] = measure_agent(targets, plan, fake)
        for target in targets:
            results[target.name] = {
                "ready_s": target.service.ready_s if target.service else None,
                "idle_rss_mib": target.idle_rss,
                "peak_rss_mib": target.sampler.peak if target.sampler else None,
                "runs": target.results,
            }
    finally:
        for service in services:
            service.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer requests, one round")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (median is reported)")
    parser.add_argument("--record", action="store_true", help="write bench/README.md")
    parser.add_argument("--no-litellm", action="store_true", help="skip LiteLLM proxy")
    parser.add_argument("--no-workers", action="store_true", help="skip the --workers 2 run")
    parser.add_argument("--no-curve", action="store_true", help="skip the history curve")
    parser.add_argument("--no-agent", action="store_true", help="skip the agent-sized calls")
    parser.add_argument(
        "--workers-only", action="store_true", help="only the --workers 2 vs 1 measurement"
    )
    args = parser.parse_args(argv)
    if args.workers_only and (args.record or args.no_workers):
        parser.error("--workers-only excludes --record and --no-workers")
    litellm = not (args.no_litellm or args.workers_only)
    plan = QUICK if args.quick else FULL
    if args.rounds:
        plan.rounds = args.rounds
    WORK.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="run-", dir=WORK))
    info = machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu']}, {info['ram_gib']} GiB; "
          f"load {info['load_before'][0]:.2f}; logs in {logs}")  # fmt: skip
    if litellm:
        with open(logs / "litellm-install.log", "ab") as install_log:
            ensure_litellm(install_log)
    started = time.perf_counter()
    from tests.fake_upstream import FakeUpstream

    mode = "quick" if args.quick else "full"
    results: dict[str, Any] = {"machine": info, "plan": plan.__dict__, "mode": mode}
    compile_app()
    with FakeUpstream() as fake:
        warm(fake.base_url)
        if not args.workers_only:
            results.update(
                compare_targets(logs, fake, plan, litellm=litellm, agent=not args.no_agent)
            )
        if not args.no_workers:
            results["workers"] = measure_workers(logs, fake.base_url, plan)
        if not (args.no_curve or args.workers_only):
            results["curve"] = measure_curve(logs, fake, plan)
    results["elapsed_s"] = time.perf_counter() - started
    results["load_after"] = os.getloadavg()
    name = "results-workers.json" if args.workers_only else "results.json"
    (WORK / name).write_text(json.dumps(results, indent=1, default=str))
    markdown = report.render_workers(results) if args.workers_only else report.render(results)
    print()
    print(markdown)
    if args.record:
        report.record(BENCH / "README.md", markdown)
        print(f"recorded in {BENCH / 'README.md'}")
    return 0


def measure_agent(targets: list[Target], plan: Plan, fake: Any) -> dict[str, list[Any]]:
    """The 150k-token tool loop (bench/agent_calls.py), every door on every target serving
    it, interleaved round by round; ``{"<door>/<target>": [one result per round]}``."""
    from bench.agent_calls import run_task

    out: dict[str, list[Any]] = {}
    with httpx.Client(timeout=120.0, trust_env=False) as client:
        for round_index in range(plan.rounds):
            for door in ("chat", "messages", "responses"):
                fake.reset()  # it keeps every body it got: 700 KiB a call
                for target in targets:
                    if target.name == "litellm" and door == "responses":
                        continue
                    name = "direct" if target.name == "direct" else door
                    pid = target.service.pid if target.service else None
                    model = (
                        ANTHROPIC_MODEL if (target.name, door) == ("litellm", "messages") else None
                    )
                    result = run_task(client, target.url, name, plan.agent_calls, pid, model)
                    out.setdefault(f"{door}/{target.name}", []).append(result)
                    print(
                        f"  round {round_index + 1} agent {door:<9} {target.name:<12} "
                        f"p50 {result['p50_ms']:7.1f} ms  server CPU "
                        f"{result['server_cpu_ms']:6.1f} ms per call",
                        flush=True,
                    )
    return out


def measure_workers(logs: Path, upstream: str, plan: Plan) -> dict[str, Any]:
    """Throughput at concurrency 32 with --workers 1 and --workers 2, interleaved, per backend.

    On SQLite files always, and on PostgreSQL when it is installed (what replicas and workers
    are for: SQLite lets one writer in at a time, across processes through its busy-wait).
    Returns ``{backend: {"w1": [runs], "w2": [runs]}}``.
    """
    from tests.servers import PostgresServer, find_postgres_bin

    sqlite = [f"sqlite+aiosqlite:///{logs}/workers{n}.db" for n in (1, 2)]
    out = {"sqlite": measure_workers_on("sqlite", sqlite, upstream, logs, plan)}
    if find_postgres_bin() is not None:
        with PostgresServer() as pg:
            urls = [pg.create_database("bench_w1"), pg.create_database("bench_w2")]
            out["postgresql"] = measure_workers_on("postgresql", urls, upstream, logs, plan)
    return out


def measure_workers_on(
    backend: str, urls: list[str], upstream: str, logs: Path, plan: Plan
) -> dict[str, list[dict[str, Any]]]:
    print(f"workers: 1 vs 2 at concurrency 32, {backend}", flush=True)
    out: dict[str, list[dict[str, Any]]] = {"w1": [], "w2": []}
    one = Contextgate(logs, upstream, urls[0], workers=1)
    two = Contextgate(logs, upstream, urls[1], workers=2)
    with contextlib.ExitStack() as stack:
        stack.callback(one.stop)
        stack.callback(two.stop)
        start(one, "contextgate --workers 1")
        start(two, "contextgate --workers 2")
        time.sleep(1.0)  # both workers of the second one have started
        for _ in range(plan.rounds):
            for key, service in (("w1", one), ("w2", two)):
                target = Target(key, service.base_url, True, service)
                result = run_load(target, 32, plan.c32_requests, plan.duration_s)
                out[key].append(result)
                print(f"  {key}: {result['throughput_rps']:.1f} req/s, server CPU "
                      f"{result['server_cpu_ms']:.2f} ms per request", flush=True)  # fmt: skip
    return out


def measure_curve(logs: Path, fake: Any, plan: Plan) -> dict[str, Any]:
    from bench.assembly import measure, measure_import, plot

    print("history curve: context assembly vs stored messages", flush=True)
    rows = asyncio.run(
        measure(fake, f"sqlite+aiosqlite:///{logs}/curve.db", SIZES, plan.assembly_repeats)
    )
    for row in rows:
        print(f"  {row['stored']:>6} stored: prepare {row['prepare_ms']:.2f} ms, "
              f"request {row['request_ms']:.2f} ms, {row['statements']} statements")  # fmt: skip
    plot(rows, BENCH / "history_curve.png", "contextgate: time vs stored history (SQLite)")
    print("a 10,000-message history brought at once, then continued", flush=True)
    imported = asyncio.run(measure_import(fake, f"sqlite+aiosqlite:///{logs}/import.db"))
    for row in imported["rows"]:
        print(f"  {row['request']:<11} {row['ms']:8.1f} ms  vectors {row.get('vectors', '—')}")
    return {"sqlite": rows, "import": imported}


if __name__ == "__main__":
    sys.exit(main())
