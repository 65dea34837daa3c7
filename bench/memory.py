"""Memory benchmark: prompt tokens per turn over a long conversation, compaction calls and cost,
retrieval latency with 10,000 memories for one user.

    .venv/bin/python -m bench.memory [--turns 1000] [--memories 10000]

Runs contextgate in-process (ASGI) against the deterministic fake upstream on a SQLite file.
The summarizer is the fake upstream serving the name ``gpt-4o-mini``, so litellm prices its
calls at gpt-4o-mini's rates with the token counts the fake reports (about len/4 per message).
Writes bench/memory_prompt_tokens.png and prints the figures recorded in bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

import app  # noqa: F401  (offline defaults first)
from app.cli import run_migrations
from app.core.settings import Settings
from app.db.models import Memory
from app.main import build_state, create_app
from app.memories.retrieval import RetrievalQuery, retrieve
from app.turns.memory_services import index_services
from tests.fake_upstream import FakeUpstream

BENCH = Path(__file__).resolve().parent
PLOT = BENCH / "memory_prompt_tokens.png"
VOCAB = (
    "deploy database schema index query latency cache redis worker queue retry budget token "
    "summary invoice customer order refund shipping warehouse python rust kubernetes pod "
    "service gateway metrics alert dashboard migration backup restore tenant billing plan "
    "feature flag rollout canary error timeout memory leak profile benchmark release"
).split()
SUMMARY = orjson.dumps(
    {
        "episodic": " ".join(["The user and the assistant discussed"] + VOCAB[:40]),
        "facts": [
            {"fact": f"The user works on {w}", "type": "fact", "importance": 6} for w in VOCAB[:3]
        ],
    }
).decode()
BUDGET = 4000


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


async def _drain(state: Any) -> None:
    while state.background:
        await asyncio.gather(*list(state.background), return_exceptions=True)


async def conversation_run(
    fake: FakeUpstream, url: str, turns: int, context: dict[str, Any], **overrides: Any
) -> dict[str, Any]:
    """Send ``turns`` turns; return prompt tokens per turn and the summarizer calls made."""
    settings = Settings(
        database_url=url,
        upstream_base_url=fake.base_url,
        max_retries=0,
        summarizer_model="gpt-4o-mini",
        memory_extraction_mode="off",
        _env_file=None,
        **overrides,
    )
    fake.reset()
    fake.script("gpt-4o-mini", [SUMMARY] * (turns * 2))
    application = create_app(settings)
    rng = random.Random(7)
    tokens: list[int] = []
    calls_at: list[int] = []
    cost = 0.0
    async with application.router.lifespan_context(application):
        state = application.state.contextgate
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://cg") as client:
            conversation_id = None
            started = time.perf_counter()
            for turn in range(turns):
                messages = [{"role": "user", "content": f"({turn}) " + sentence(rng, 40)}]
                if conversation_id is None:
                    messages.insert(0, {"role": "system", "content": "You are a helpful SRE."})
                body: dict[str, Any] = {
                    "model": "fake-model",
                    "messages": messages,
                    "context": context,
                }
                if conversation_id:
                    body["conversation_id"] = conversation_id
                response = await client.post("/v1/chat/completions", json=body)
                response.raise_for_status()
                result = response.json()
                conversation_id = result["conversation_id"]
                utilization = result["context_utilization"]
                tokens.append(utilization["tokens_used"])
                cost += utilization["planning_cost"]["summarizer_cost"]
                await _drain(state)
                stats = fake.stats()
                calls_at.append(stats["calls"] - (turn + 1))
            elapsed = time.perf_counter() - started
    return {"tokens": tokens, "calls_at": calls_at, "elapsed_s": elapsed, "cost": cost}


def summarizer_cost(calls: int) -> float:
    """What ``calls`` gpt-4o-mini summarizer calls cost at the fake's token counts."""
    import litellm

    prompt = 6000 // 4 + 300  # an upper bound of one window (summarizer_max_input_tokens)
    completion = len(SUMMARY) // 4 + 1
    p, c = litellm.cost_per_token("gpt-4o-mini", prompt_tokens=prompt, completion_tokens=completion)
    return float(p + c) * calls


async def retrieval_latency(url: str, count: int, queries: int) -> dict[str, float]:
    settings = Settings(database_url=url, _env_file=None)
    state = build_state(settings)
    rng = random.Random(11)
    now = datetime.now(UTC)
    async with state.database.writing() as session:
        session.add_all(
            Memory(
                tenant_id="default",
                user_id="bench-user",
                content=sentence(rng, 12),
                memory_type=rng.choice(["fact", "preference", "decision", "note"]),
                importance=rng.randint(1, 10),
                created_at=now - timedelta(days=rng.randint(0, 365)),
                updated_at=now - timedelta(days=rng.randint(0, 365)),
            )
            for _ in range(count)
        )
    count_tokens = lambda text: state.tokens.count_text(text, "gpt-4o")  # noqa: E731
    count_tokens("warm up the tokenizer")
    timings: list[float] = []
    cold = 0.0
    for i in range(queries + 1):
        query = sentence(rng, 8)
        started = time.perf_counter()
        async with state.database.reading() as session:
            question = RetrievalQuery("default", "bench-user", query, count_tokens)
            found = await retrieve(index_services(state), state.settings, session, question, [])
        elapsed = (time.perf_counter() - started) * 1000
        assert found
        if i == 0:
            cold = elapsed
        else:
            timings.append(elapsed)
    await state.database.dispose()
    timings.sort()
    return {
        "cold_ms": cold,
        "p50_ms": statistics.median(timings),
        "p99_ms": timings[int(len(timings) * 0.99) - 1],
    }


def plot(curves: dict[str, list[int]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    for label, values in curves.items():
        axis.plot(range(1, len(values) + 1), values, label=label, linewidth=1.2)
    axis.set_xlabel("turn")
    axis.set_ylabel("prompt tokens sent upstream")
    axis.set_yscale("log")
    axis.set_title("Prompt tokens per turn over a long conversation")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def fresh_db(directory: Path, name: str) -> str:
    url = f"sqlite+aiosqlite:///{directory / name}"
    run_migrations(url)
    return url


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeUpstream() as fake:
        directory = Path(tmp)
        urls = {
            name: fresh_db(directory, f"{name}.db") for name in ("full", "trim", "compact", "mem")
        }
        full = asyncio.run(
            conversation_run(fake, urls["full"], args.turns, {"max_input_tokens": 10_000_000})
        )
        trim = asyncio.run(
            conversation_run(
                fake, urls["trim"], args.turns, {"max_input_tokens": BUDGET}, raw_tail_turns=10**6
            )
        )
        compact = asyncio.run(
            conversation_run(fake, urls["compact"], args.turns, {"max_input_tokens": BUDGET})
        )
        retrieval = asyncio.run(retrieval_latency(urls["mem"], args.memories, args.queries))
    plot(
        {
            "no budget (whole history)": full["tokens"],
            f"budget {BUDGET}, plain trim (old turns lost)": trim["tokens"],
            f"budget {BUDGET}, compaction (old turns summarized)": compact["tokens"],
        },
        PLOT,
    )
    calls = compact["calls_at"]
    trim_calls = trim["calls_at"][-1]
    per_100 = [
        calls[min(i + 99, len(calls) - 1)] - (calls[i - 1] if i else 0)
        for i in range(0, len(calls), 100)
    ]
    tail = compact["tokens"][len(compact["tokens"]) // 2 :]
    print(f"turns: {args.turns}")
    print(
        f"prompt tokens at last turn: whole history {full['tokens'][-1]}, "
        f"plain trim {trim['tokens'][-1]}, compaction {compact['tokens'][-1]}"
    )
    print(f"compaction run, second half: mean {statistics.mean(tail):.0f}, max {max(tail)} tokens")
    print(
        f"summarizer calls: {calls[-1]} in all (plain-trim run: {trim_calls}); "
        f"per 100 turns: {per_100}"
    )
    print(
        f"summarizer cost per 100 turns at gpt-4o-mini rates: "
        f"${summarizer_cost(calls[-1]) / (args.turns / 100):.5f} (upper bound)"
    )
    print(
        f"wall time: whole {full['elapsed_s']:.1f}s, trim {trim['elapsed_s']:.1f}s, "
        f"compaction {compact['elapsed_s']:.1f}s"
    )
    print(
        f"retrieval with {args.memories} memories: cold {retrieval['cold_ms']:.1f} ms, "
        f"p50 {retrieval['p50_ms']:.2f} ms, p99 {retrieval['p99_ms']:.2f} ms"
    )
    print(f"plot: {PLOT}")


if __name__ == "__main__":
    main()
