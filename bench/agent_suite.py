"""``python -m bench.agent_loop --suite real [--record]``: agents as issue 27 models them.

For each upstream token scale (the provider's prompt tokens per contextgate token: 1.0, 1.2,
1.35), a fresh fake upstream and a fresh contextgate (SQLite, so the learned ratio starts
from nothing), and:

- the coding-agent shape (bench/agent_coding.py) on ``/v1/messages`` through litellm's
  anthropic provider to the validating Anthropic-shaped fake, thinking on, a 100k budget,
  against the same session sent to the fake directly;
- the chat-door agent loop (bench/agent_loop.py) at 64k, 30 steps of two calls, with every
  memory feature at its default (compaction, periodic summaries, periodic extraction for a
  ``user``, message recall), against pass-through.

Figures from the bodies the fake received (bench/agent_measure.py) and, for rebases and the
learned ratio, from contextgate's request log (``context_utilization``).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.agent_coding import UPSTREAM_MODEL, coding_session, script
from bench.agent_measure import Call, Figures, measure
from bench.services import Contextgate
from tests.fake_upstream import FakeUpstream
from tests.support.models import fake_model_list

__all__ = ["Outcome", "Setup", "calls_of", "server_log", "suite"]

CODING_MODEL = "claude-sonnet-4-5"  # the client's name, routed to the Anthropic-shaped fake
CHAT_MODEL = "agent-model"
CODING_BUDGET, CHAT_BUDGET = 100_000, 64_000


@dataclass
class Outcome:
    """One run: its figures and what contextgate's request log says of it."""

    shape: str
    scale: float
    mode: str
    budget: int
    figures: Figures
    reference: Figures | None = None  # direct / pass-through
    log: list[dict[str, Any]] = field(default_factory=list)  # context_utilization per call

    @property
    def ratio(self) -> float:
        return self.figures.ratio(self.reference) if self.reference else 1.0

    @property
    def rebases(self) -> list[tuple[int, str]]:
        """(call, reason) of each rebase after the first prompt."""
        found = []
        for n, utilization in enumerate(self.log, start=1):
            stats = utilization.get("cache_stats") or {}
            if stats.get("rebased") and n > 1:
                found.append((n, str(stats.get("rebase_reason"))))
        return found

    @property
    def thinking_disabled(self) -> int:
        return sum(1 for u in self.log if u.get("thinking_disabled"))

    @property
    def memory(self) -> str:
        """How often the memory features showed in the prompts (context_utilization)."""
        compacted = sum(1 for u in self.log if u.get("compaction"))
        injected = sum(1 for u in self.log if u.get("memories_injected"))
        recalled = sum(1 for u in self.log if u.get("messages_recalled"))
        return (
            f"compaction reported on {compacted} calls, memories injected on {injected}, "
            f"messages recalled on {recalled}"
        )

    @property
    def calibration(self) -> float:
        last = (self.log[-1].get("calibration") or {}) if self.log else {}
        return float(last.get("ratio") or 1.0)


def calls_of(fake: FakeUpstream, wire: str, model: str, asked_thinking: bool) -> list[Call]:
    path = "/v1/messages" if wire == "anthropic" else "/v1/chat/completions"
    return [
        Call(wire, record["body"], asked_thinking, record["headers"].get("anthropic-beta", ""))
        for record in fake.requests()
        if record.get("path") == path and (record.get("body") or {}).get("model") == model
    ]


def server_log(database: Path, model: str) -> list[dict[str, Any]]:
    """Every logged call of ``model``, oldest first: its context_utilization."""
    with closing(sqlite3.connect(database)) as connection:
        rows = connection.execute(
            "SELECT context_utilization FROM request_logs WHERE model = ? ORDER BY created_at",
            (model,),
        ).fetchall()
    return [orjson.loads(row[0]) if row[0] else {} for row in rows]


@dataclass
class Setup:
    fake: FakeUpstream
    server: Contextgate
    database: Path
    client: httpx.Client
    scale: float


@contextmanager
def setup(scale: float, tmp: Path) -> Iterator[Setup]:
    """A fake upstream at ``scale`` and a contextgate with a fresh database in front of it."""
    with FakeUpstream(token_scale=scale) as fake:
        directory = tmp / f"scale-{scale}"
        directory.mkdir()
        config = fake_model_list(
            directory, fake, names=(CHAT_MODEL, "bench-model", "gpt-4o-mini"),
            anthropic=(CODING_MODEL,),
        )  # fmt: skip
        database = directory / "contextgate.db"
        env = {"CONTEXTGATE_CONFIG": str(config)}
        with (
            Contextgate(directory, fake.base_url, f"sqlite+aiosqlite:///{database}", extra_env=env)
            as server,
            httpx.Client(base_url=server.base_url, timeout=300.0, trust_env=False) as client,
        ):  # fmt: skip
            assert isinstance(server, Contextgate)
            yield Setup(fake, server, database, client, scale)


def coding_runs(s: Setup, files: int, policy: dict[str, Any] | None = None) -> list[Outcome]:
    """Direct and through contextgate (``policy``: a ``context.cache`` for the latter)."""
    direct = httpx.Client(timeout=300.0, trust_env=False)
    s.fake.reset()
    s.fake.script(UPSTREAM_MODEL, script(files))
    _, failed = coding_session(direct, f"{s.fake.url}/v1/messages", UPSTREAM_MODEL, files=files)
    reference = measure(
        calls_of(s.fake, "anthropic", UPSTREAM_MODEL, True), CODING_BUDGET, s.scale, failed
    )
    s.fake.reset()
    s.fake.script(UPSTREAM_MODEL, script(files))
    _, failed = coding_session(
        s.client, f"{s.server.base_url}/messages", CODING_MODEL, files=files,
        context={"max_input_tokens": CODING_BUDGET, **({"cache": policy} if policy else {})},
    )  # fmt: skip
    through = measure(
        calls_of(s.fake, "anthropic", UPSTREAM_MODEL, True), CODING_BUDGET, s.scale, failed
    )
    shape = f"coding agent, {files} reads"
    return [
        Outcome(shape, s.scale, "direct", CODING_BUDGET, reference, reference),
        Outcome(
            shape, s.scale, "contextgate", CODING_BUDGET, through, reference,
            server_log(s.database, CODING_MODEL),
        ),
    ]  # fmt: skip


def chat_runs(s: Setup, steps: int) -> list[Outcome]:
    from bench.agent_loop import run_loop  # the chat-door loop, with memory on via ``user``

    seen = len(server_log(s.database, CHAT_MODEL))
    run_loop(s.client, s.fake, "cache-aware fit", CHAT_BUDGET, steps, {}, extra={"user": "dev-1"})
    through = measure(calls_of(s.fake, "chat", CHAT_MODEL, False), CHAT_BUDGET, s.scale)
    log = server_log(s.database, CHAT_MODEL)[seen:]
    run_loop(s.client, s.fake, "pass-through", CHAT_BUDGET, steps, {})
    reference = measure(calls_of(s.fake, "chat", CHAT_MODEL, False), CHAT_BUDGET, s.scale)
    shape = "chat-door loop, memory on"
    return [
        Outcome(shape, s.scale, "pass-through", CHAT_BUDGET, reference, reference),
        Outcome(shape, s.scale, "contextgate", CHAT_BUDGET, through, reference, log),
    ]


def suite(scales: list[float], files: int, steps: int, shapes: set[str]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in scales:
            with setup(scale, Path(tmp)) as s:
                if "coding" in shapes:
                    outcomes += coding_runs(s, files)
                    print(row(outcomes[-1]), flush=True)
                if "chat" in shapes:
                    outcomes += chat_runs(s, steps)
                    print(row(outcomes[-1]), flush=True)
    return outcomes


HEADER = (
    "| shape | upstream tokens | mode | calls | cost vs direct | prefix kept | thinking "
    "| largest prompt | over budget | broken pairs | refusals | rebases |\n"
    "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def row(o: Outcome) -> str:
    f = o.figures
    thinking = f"{f.thinking_sent}/{f.thinking_asked}" if f.thinking_asked else "n/a"
    rebases = str(len(o.rebases)) if o.mode == "contextgate" else "n/a"
    return (
        f"| {o.shape} | {o.scale:.2f}x | {o.mode} | {f.calls} | {o.ratio:.2f}x | {f.kept:.0%} "
        f"| {thinking} | {f.largest:,} | {f.over} | {f.broken} | {len(f.refusals)} | {rebases} |"
    )


def table(outcomes: list[Outcome]) -> str:
    return "\n".join([HEADER, *(row(o) for o in outcomes)])


def details(outcomes: list[Outcome]) -> str:
    """Where the prefix broke and why contextgate rebased, per contextgate run."""
    lines = []
    for o in outcomes:
        if o.mode != "contextgate":
            continue
        reasons = "; ".join(f"call {n}: {reason}" for n, reason in o.rebases) or "none"
        lines.append(
            f"- {o.shape} at {o.scale:.2f}x: prefix not kept at calls {o.figures.not_kept or '-'}; "
            f"rebases: {reasons}; learned ratio {o.calibration:.2f}; thinking disabled on "
            f"{o.thinking_disabled} calls"
            + (f"; {o.memory}" if o.shape.startswith("chat") else "")
            + (f"; refusals: {o.figures.refusals[:3]}" if o.figures.refusals else "")
        )
    return "\n".join(lines)
