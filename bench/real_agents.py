"""``python -m bench.real_agents [--files 40] [--scale 1.2] [--record]``: real agents' bills.

**Claude Code** (test-artifacts/agents, ``claude -p``, thinking on) reads ``--files`` files of
3k-8k tokens in one task: the fake upstream's Anthropic ``/v1/messages`` is scripted to call
``Read`` on each file in turn, then answer. Run twice on the same fake (token scale
``--scale``): Claude Code talking to the fake directly, then through contextgate (SQLite,
litellm's anthropic provider, a ~100k budget: the model's ``max_input_tokens`` set so that the
window minus Claude Code's ``max_tokens`` and the 5% margin is 100k).

**Codex CLI** (``codex exec``) does the same with ``cat`` through its ``exec_command`` tool on
``/v1/responses``; contextgate answers it from the fake's chat completions (a ~100k budget from
the model's ``max_input_tokens``). Codex speaks only the Responses API, which the fake does not
serve, so its direct bill is read from what Codex sent (bench/recorder.py stands between them).

Figures as bench/agent_measure.py computes them; rebases from contextgate's request log.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path
from typing import Any

import orjson

from bench.agent_measure import Call, measure
from bench.agent_suite import Outcome, details, server_log, table
from bench.services import Contextgate
from tests.fake_upstream import FakeUpstream
from tests.support.agents import CLAUDE_CODE, npm_agent
from tests.support.claude_code import (
    FINAL,
    SMALL_UPSTREAM,
    UPSTREAM,
    read_script,
    run_claude,
    write_files,
)
from tests.support.models import ANTHROPIC_LITELLM_MODEL

__all__ = ["claude_outcomes", "main", "window_for"]

BUDGET = 100_000
CLAUDE_MODEL, CLAUDE_SMALL = "claude-sonnet-4-5", "claude-haiku-4-5"
PROMPT = "Read every module under src/, one file at a time, then say you are done."


def window_for(budget: int, max_tokens: int, margin: float = 0.05) -> int:
    """The ``max_input_tokens`` that leaves ``budget`` once contextgate has taken the output
    reserve (the request's max_tokens, at most half the window) and the margin off it."""
    window = math.ceil((budget + max_tokens) / (1 - margin))
    return window if max_tokens <= window // 2 else math.ceil(budget / (0.5 - margin))


def claude_config(folder: Path, fake: FakeUpstream, window: int) -> Path:
    entry = {"api_base": fake.url, "api_key": "sk-ant-fake-upstream"}
    config = {
        "model_list": [
            {
                "model_name": CLAUDE_MODEL,
                "litellm_params": {"model": ANTHROPIC_LITELLM_MODEL, **entry},
                "model_info": {"max_input_tokens": window},
            },
            {
                "model_name": CLAUDE_SMALL,
                "litellm_params": {"model": f"anthropic/{SMALL_UPSTREAM}", **entry},
            },
        ]
    }
    path = folder / "models.json"
    path.write_bytes(orjson.dumps(config))
    return path


def _calls(fake: FakeUpstream) -> list[Call]:
    return [
        # Claude Code asks for thinking on every call
        Call("anthropic", r["body"], True, r["headers"].get("anthropic-beta", ""))
        for r in fake.requests()
        if r.get("path") == "/v1/messages" and (r.get("body") or {}).get("model") == UPSTREAM
    ]


def claude_outcomes(
    files: int, scale: float, tmp: Path, budget: int = BUDGET
) -> tuple[list[Outcome], dict[str, Any]]:
    """Claude Code direct and through contextgate; also their final results."""
    claude = npm_agent(*CLAUDE_CODE)
    if isinstance(claude, str):
        raise SystemExit(claude)
    shape = f"Claude Code, {files} reads"
    with FakeUpstream(token_scale=scale) as fake:
        home = tmp / "claude-direct"
        paths = write_files(home / "work" / "src", files)
        fake.script(UPSTREAM, read_script(paths))
        direct = run_claude(
            claude, fake.url, "sk-ant-direct", home, PROMPT, model=UPSTREAM,
            small_model=SMALL_UPSTREAM,
        )  # fmt: skip
        direct_calls = _calls(fake)
        asked = sum(c.thinking_sent for c in direct_calls)
        reference = measure(direct_calls, budget, scale, int(direct.get("is_error", True)))
        max_tokens = int(direct_calls[0].body["max_tokens"])
        server_dir = tmp / "contextgate"
        server_dir.mkdir()
        database = server_dir / "contextgate.db"
        env = {
            "CONTEXTGATE_CONFIG": str(
                claude_config(server_dir, fake, window_for(budget, max_tokens))
            )
        }
        with Contextgate(
            server_dir, fake.base_url, f"sqlite+aiosqlite:///{database}", extra_env=env
        ) as server:
            fake.reset()
            home = tmp / "claude-through"
            paths = write_files(home / "work" / "src", files)
            fake.script(UPSTREAM, read_script(paths))
            root = server.base_url.removesuffix("/v1")
            through = run_claude(
                claude, root, "sk-cg", home, PROMPT, model=CLAUDE_MODEL, small_model=CLAUDE_SMALL
            )
            figures = measure(_calls(fake), budget, scale, int(through.get("is_error", True)))
            log = server_log(database, CLAUDE_MODEL)
    outcomes = [
        Outcome(shape, scale, "direct", budget, reference, reference),
        Outcome(shape, scale, "contextgate", budget, figures, reference, log),
    ]
    results = {
        "direct": {k: direct.get(k) for k in ("is_error", "result", "num_turns")},
        "through": {k: through.get(k) for k in ("is_error", "result", "num_turns")},
        "direct_thinking_asked": f"{asked}/{len(direct_calls)}",
        "finished": direct.get("result") == FINAL and through.get("result") == FINAL,
    }
    return outcomes, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--scale", type=float, default=1.2)
    parser.add_argument("--budget", type=int, default=BUDGET)
    parser.add_argument("--agents", default="claude,codex")
    parser.add_argument(
        "--codex-budgets", default="100000,40000", help="Codex truncates each output to ~2k tokens"
    )
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    outcomes: list[Outcome] = []
    results: dict[str, Any] = {}
    agents = args.agents.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if "claude" in agents:
            found, results["claude"] = claude_outcomes(
                args.files, args.scale, Path(tmp), args.budget
            )
            outcomes += found
            print(table(found), flush=True)
        if "codex" in agents:
            from bench.real_codex import codex_outcomes

            for budget in [int(b) for b in args.codex_budgets.split(",")]:
                folder = Path(tmp) / f"codex-{budget}"
                folder.mkdir()
                window = window_for(budget, 1024)  # Codex sends no max_output_tokens
                found, results[f"codex {budget}"] = codex_outcomes(
                    args.files, args.scale, folder, budget, window
                )
                outcomes += found
                print(table(found), flush=True)
    if args.record:
        from bench.agent_report import real_text, record_block

        record_block("real-agents", real_text(outcomes, results))
    print(table(outcomes))
    print(details(outcomes))
    print(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
