"""Turn bench.run's results into the markdown table (printed, and recorded in README.md)."""

from __future__ import annotations

import datetime as dt
import math
import re
import statistics
from pathlib import Path
from typing import Any

from app.conversations.tail_cache import ROWS as KEPT_ROWS

START = "<!-- speed-results:start (written by python -m bench.run --record) -->"
END = "<!-- speed-results:end -->"
SECTION = "## Speed and scale"


def _value(run: dict[str, Any], path: tuple[str, ...]) -> float:
    value: Any = run
    for key in path:
        value = value[key]
    return float(value)


def _median(runs: list[dict[str, Any]], *path: str) -> float:
    values = [_value(run, path) for run in runs]
    return statistics.median(values) if values else math.nan


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("yes" if ok else "**no**")


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def _paired(
    ours: list[dict[str, Any]],
    theirs: list[dict[str, Any]],
    *path: str,
    base: list[dict[str, Any]] | None = None,
) -> tuple[float, float, float]:
    """(ours, theirs, ratio) from runs measured side by side (the i-th of each list in the same
    round): the medians of the values, less ``base``'s of the same round when given, and the
    median of the rounds' own ratios, which a machine drifting between rounds does not move."""
    pairs = list(zip(ours, theirs, base or ours, strict=False))
    if not pairs:
        return math.nan, math.nan, math.nan
    mine, other, ratios = [], [], []
    for run_ours, run_theirs, run_base in pairs:
        offset = _value(run_base, path) if base else 0.0
        a, b = _value(run_ours, path) - offset, _value(run_theirs, path) - offset
        mine.append(a)
        other.append(b)
        ratios.append(_ratio(a, b))
    return statistics.median(mine), statistics.median(other), statistics.median(ratios)


def _ratio_text(ratio: float, target: str) -> str:
    """The ratio to 2 digits, or 3 where 2 would read as the goal itself (0.254 against
    "≤ 0.25 ×": not met, and 0.25 would not say why)."""
    shown = _fmt(ratio, 2)
    return _fmt(ratio, 3) if re.search(rf"(?<![\d.]){re.escape(shown)}(?![\d])", target) else shown


def _workers_rows(workers: dict[str, Any] | None) -> list[tuple[str, ...]]:
    """One `--workers 2` vs 1 row per database backend measured."""
    if not workers:
        return []
    if "w1" in workers:  # results of a run before both backends were measured
        workers = {workers.get("backend", "sqlite"): workers}
    rows: list[tuple[str, ...]] = []
    for backend, runs in workers.items():
        w1 = _median(runs["w1"], "throughput_rps")
        w2 = _median(runs["w2"], "throughput_rps")
        ratio = _ratio(w2, w1)
        met = _verdict(None if math.isnan(ratio) else ratio >= 1.7)
        label = f"`--workers 2` vs 1, concurrency 32, {backend} (req/s)"
        rows.append((label, f"{_fmt(w2)} vs {_fmt(w1)}", "—", _fmt(ratio, 2), "≥ 1.7 ×", met))
    return rows


AGENT_DOORS = (("chat", "/v1/chat/completions"), ("messages", "/v1/messages"),
               ("responses", "/v1/responses"))  # fmt: skip


def _agent_added(agent: dict[str, Any], door: str, target: str) -> float:
    """Median over rounds of (the target's p50 − direct's p50, same round and door)."""
    ours, base = agent.get(f"{door}/{target}"), agent.get(f"{door}/direct")
    if not ours or not base:
        return math.nan
    return statistics.median(a["p50_ms"] - b["p50_ms"] for a, b in zip(ours, base, strict=False))


def _agent_goal_rows(agent: dict[str, Any] | None) -> list[tuple[str, ...]]:
    """Issue 26: contextgate's added time per agent call ≤ 0.5× LiteLLM's, per shared door."""
    if not agent:
        return []
    rows: list[tuple[str, ...]] = []
    for door, path in AGENT_DOORS[:2]:
        ours = _agent_added(agent, door, "contextgate")
        theirs = _agent_added(agent, door, "litellm")
        ratio = _ratio(ours, theirs)
        met = _verdict(None if math.isnan(ratio) else ratio <= 0.5)
        label = f"agent call, 150k tokens, {path}: added time p50 (ms)"
        rows.append((label, _fmt(ours), _fmt(theirs), _fmt(ratio, 2), "≤ 0.5 ×", met))
    return rows


def _agent_table(agent: dict[str, Any] | None) -> list[str]:
    if not agent:
        return []
    lines = [
        "Agent-sized calls (issue 26; `bench/agent_calls.py`): a ~150k-token tool loop of 50 "
        "tool results, one more tool step per call, the whole history resent; per call, "
        "median of rounds (direct: the same prompt in chat form straight to the fake upstream):",
        "",
        "| door | direct p50 (ms) | contextgate p50 / added (ms) | contextgate server CPU (ms) "
        "| LiteLLM proxy p50 / added (ms) | LiteLLM proxy server CPU (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for door, path in AGENT_DOORS:
        base = agent.get(f"{door}/direct") or []
        cells = [path, _fmt(_median(base, "p50_ms"))]
        for target in ("contextgate", "litellm"):
            runs = agent.get(f"{door}/{target}")
            if not runs:
                cells += ["—", "—"]
                continue
            p50, added = _median(runs, "p50_ms"), _agent_added(agent, door, target)
            cells += [f"{_fmt(p50)} / {_fmt(added)}", _fmt(_median(runs, "server_cpu_ms"))]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    return [
        "| goal (issue 6) | contextgate | LiteLLM proxy | ratio | goal | met |",
        "|---|---|---|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def render_workers(results: dict[str, Any]) -> str:
    """The table of ``python -m bench.run --workers-only``: the workers rows alone."""
    return "\n".join(_table(_workers_rows(results.get("workers"))))


def render(results: dict[str, Any]) -> str:
    info = results["machine"]
    direct = results["direct"]["runs"]
    cg = results["contextgate"]
    ll = results.get("litellm")
    lines: list[str] = []
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = info["load_before"]
    lines.append(
        f"Run {when}, `python -m bench.run{' --quick' if results['mode'] == 'quick' else ''}` "
        f"({results['plan']['rounds']} interleaved round(s), median of rounds); machine: "
        f"{info['nproc']} CPUs ({info['cpu']}), {info['ram_gib']} GiB RAM, Python "
        f"{info['python']}; load average before {load[0]:.2f}, after "
        f"{results['load_after'][0]:.2f} (a shared machine: read ratios, not absolutes)."
    )
    lines.append("")

    def p(runs: dict[str, list[dict[str, Any]]], key: str, q: str = "p50") -> float:
        return _median(runs[key], "latency_ms", q) if key in runs else math.nan

    def added(runs: dict[str, list[dict[str, Any]]], key: str, q: str) -> float:
        return p(runs, key, q) - p(direct, key, q)

    rows: list[tuple[str, ...]] = []

    def goal(label: str, ours: str, theirs: str, ratio: float, target: str, ok: bool) -> None:
        met = _verdict(None if math.isnan(ratio) else ok)
        rows.append((label, ours, theirs, _ratio_text(ratio, target), target, met))

    cg_runs = cg["runs"]
    ll_runs = ll["runs"] if ll else {}
    nan = math.nan

    def paired(key: str, *path: str, minus_direct: bool = False) -> tuple[float, float, float]:
        if not ll or key not in ll_runs:
            return _median(cg_runs[key], *path), nan, nan
        base = direct[key] if minus_direct else None
        return _paired(cg_runs[key], ll_runs[key], *path, base=base)

    cg_added, ll_added, ratio = paired("c1", "latency_ms", "p50", minus_direct=True)
    label = "added latency p50, concurrency 1 (ms)"
    goal(label, _fmt(cg_added, 2), _fmt(ll_added, 2), ratio, "≤ 0.25 ×", ratio <= 0.25)
    cg_tp, ll_tp, ratio = paired("c32", "throughput_rps")
    label = "throughput, concurrency 32 (req/s)"
    goal(label, _fmt(cg_tp), _fmt(ll_tp), ratio, "≥ 3 ×", ratio >= 3)
    cg_ttfb, ll_ttfb, ratio = paired("stream_c8", "ttfb_ms", "p50")
    label = "streaming TTFB p50, concurrency 8 (ms)"
    goal(label, _fmt(cg_ttfb, 2), _fmt(ll_ttfb, 2), ratio, "≤ 0.25 ×", ratio <= 0.25)
    for key, label in (("c1", "concurrency 1"), ("c32", "concurrency 32")):
        if "server_cpu_ms" in (cg_runs.get(key) or [{}])[0]:
            ours, theirs, ratio = paired(key, "server_cpu_ms")
            rows.append((f"server CPU per request, {label} (ms; robust to a busy machine)",
                         _fmt(ours, 2), _fmt(theirs, 2), _fmt(ratio, 2),
                         "—", "—"))  # fmt: skip
    cg_rss = cg["peak_rss_mib"]
    ll_rss = ll["peak_rss_mib"] if ll else nan
    ratio = _ratio(cg_rss, ll_rss)
    goal("peak RSS under that load (MiB)", _fmt(cg_rss, 0), _fmt(ll_rss, 0), ratio, "≤ 0.4 ×",
         ratio <= 0.4)  # fmt: skip
    ll_idle = _fmt(ll["idle_rss_mib"], 0) if ll else "—"
    rows.append(("idle RSS after start (MiB)", _fmt(cg["idle_rss_mib"], 0), ll_idle, "—", "—", "—"))
    ll_ready = _fmt(ll["ready_s"], 2) if ll else "—"
    ready = cg["ready_s"]
    label = "ready to serve: spawn → first answer (s)"
    rows.append((label, _fmt(ready, 2), ll_ready, "—", "≤ 1.5 s", _verdict(ready <= 1.5)))
    curve = (results.get("curve") or {}).get("sqlite")
    if curve:
        by_size = {row["stored"]: row for row in curve}
        if 100 in by_size and 10_000 in by_size:
            big, small = by_size[10_000]["prepare_ms"], by_size[100]["prepare_ms"]
            ratio = _ratio(big, small)
            label = "context assembly, 10,000 vs 100 stored messages"
            goal(label, f"{_fmt(big, 2)} vs {_fmt(small, 2)} ms", "—", ratio, "≤ 1.2 ×",
                 ratio <= 1.2)  # fmt: skip
            # A conversation this process keeps the rows of (tail_cache.ROWS) skips the window's
            # read: one statement fewer; past it the count must not move, and never pass 6.
            past = {row["statements"] for row in curve if row["stored"] > KEPT_ROWS}
            most = max(row["statements"] for row in curve)
            label = "SQL statements per request, 10 … 10,000 stored"
            listed = " / ".join(str(row["statements"]) for row in curve)
            met = len(past) <= 1 and most <= 6
            rows.append((label, listed, "—", "—", "≤ 6, constant", _verdict(met)))
    rows.extend(_agent_goal_rows(results.get("agent")))
    rows.extend(_workers_rows(results.get("workers")))

    lines.extend(_table(rows))
    lines.append("")
    blocks = results["plan"].get("c1_blocks", 1)
    lines.append(
        "The added latency, throughput, TTFB and server CPU rows show medians of the rounds; "
        "their ratio is the median of each round's own ratio (every target measured back to "
        "back within a round; "
        f"concurrency 1 in {blocks} such block(s) per round), which a machine whose speed "
        "drifts between rounds does not move. Concurrency 1's added latency is each run's p50 "
        "less the direct upstream's p50 measured just before it."
    )
    lines.append("")
    lines.extend(_agent_table(results.get("agent")))

    lines.append("Added latency versus calling the fake upstream directly (issue 2), ms:")
    lines.append("")
    lines.append("| | direct p50 | direct p99 | contextgate +p50 | contextgate +p99 "
                 "| LiteLLM proxy +p50 | LiteLLM proxy +p99 |")  # fmt: skip
    lines.append("|---|---|---|---|---|---|---|")
    for key, label in (("c1", "concurrency 1"), ("c32", "concurrency 32")):
        lines.append(
            f"| {label} | {_fmt(p(direct, key), 2)} | {_fmt(p(direct, key, 'p99'), 2)} "
            f"| {_fmt(added(cg_runs, key, 'p50'), 2)} | {_fmt(added(cg_runs, key, 'p99'), 2)} "
            f"| {_fmt(added(ll_runs, key, 'p50'), 2) if ll else '—'} "
            f"| {_fmt(added(ll_runs, key, 'p99'), 2) if ll else '—'} |"
        )
    lines.append("")
    cpu = _median(cg_runs["c32"], "client_cpu_s") / max(_median(cg_runs["c32"], "elapsed_s"), 1e-9)
    lines.append(
        f"Load generator (asyncio + httptools, its own process) used {cpu:.0%} of a core during "
        "contextgate's concurrency-32 run: on 2 cores it competes with the server, for every "
        "target alike."
    )
    if curve:
        lines.append("")
        lines.append("Context assembly against stored history (SQLite; `prepare()` = resolve, "
                     "count, load the window, context engine, assemble; median):")  # fmt: skip
        lines.append("")
        lines.append("| stored messages | prepare (ms) | whole request in-process (ms) "
                     "| messages sent | SQL statements |")  # fmt: skip
        lines.append("|---|---|---|---|---|")
        for row in curve:
            times = f"{_fmt(row['prepare_ms'], 2)} | {_fmt(row['request_ms'], 2)}"
            lines.append(
                f"| {row['stored']:,} | {times} | {row['sent_messages']} | {row['statements']} |"
            )
        lines.append("")
        lines.append("![history curve](history_curve.png)")
    imported = (results.get("curve") or {}).get("import")
    if imported:
        lines.append("")
        lines.append(
            f"A history of {imported['count']:,} messages brought by one request, then continued "
            "by id one request a second, the after-answer work running meanwhile (in-process, "
            "SQLite; `measure_import` in bench/assembly.py): each request's time, the history's "
            "messages with a recall vector by then, and what `context_utilization.notes` said:"
        )
        lines.append("")
        lines.append("| request | ms | vectors | notes |")
        lines.append("|---|---|---|---|")
        for row in imported["rows"]:
            notes = "; ".join(row.get("notes") or []) or "—"
            vectors = row.get("vectors", "—")
            lines.append(f"| {row['request']} | {_fmt(row['ms'])} | {vectors} | {notes} |")
    return "\n".join(lines)


INTRO = """# Benchmarks

`make bench` (= `python -m bench.run`) sets up everything it needs on loopback and prints its
tables; sections below hold the latest recorded results of each area.
"""


def record(readme: Path, markdown: str) -> None:
    """Replace the generated block inside `## Speed and scale` (other sections untouched)."""
    text = readme.read_text() if readme.exists() else INTRO
    block = f"{START}\n{markdown}\n{END}"
    if START in text and END in text:
        text = re.sub(
            re.escape(START) + r".*?" + re.escape(END), lambda _m: block, text, flags=re.S
        )
    elif SECTION in text:
        head, tail = text.split(SECTION, 1)
        text = f"{head}{SECTION}\n\n{block}\n{tail.lstrip(chr(10))}"
    else:
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\n{block}\n"
    readme.write_text(text)
