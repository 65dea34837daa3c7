"""Codex CLI (``codex exec``) reading files through contextgate's ``/v1/responses``.

The fake upstream's chat completions are scripted to call Codex's ``exec_command`` with
``cat`` on each file in turn, then answer; contextgate (SQLite, a ~100k budget from the model's
``max_input_tokens``; ``CONTEXTGATE_RESPONSES_STORE_FALSE=manage``, since Codex sends
``store: false``) turns Codex's Responses requests into those chat calls. The direct bill is
Codex's own requests, recorded on the way in (bench/recorder.py): the fake serves no Responses
API for Codex to talk to directly.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson

from bench.agent_measure import Call, measure
from bench.agent_suite import Outcome, calls_of, server_log
from bench.recorder import Recorder
from bench.services import Contextgate
from tests.fake_upstream import FakeUpstream
from tests.support.agents import CODEX, npm_agent
from tests.support.claude_code import write_files

__all__ = ["codex_outcomes"]

MODEL = "gpt-4o-mini"  # what Codex asks for (it knows the model); routed to the fake
FINAL = "All files read."


def _config(folder: Path, fake: FakeUpstream, window: int) -> Path:
    config = {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}", "api_base": fake.base_url, "api_key": "sk-fake",
                },
                "model_info": {"max_input_tokens": window},
            }
        ]
    }  # fmt: skip
    path = folder / "models.json"
    path.write_bytes(orjson.dumps(config))
    return path


def _script(paths: list[Path]) -> list[str | dict[str, Any]]:
    reads: list[str | dict[str, Any]] = [
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": f"cat src/{p.name}"}}]}
        for p in paths
    ]
    return [*reads, {"content": FINAL}]


def _run_codex(codex: Path, base_url: str, home: Path, work: Path) -> tuple[int, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "contextgate"\n'
        '[model_providers.contextgate]\nname = "contextgate"\n'
        f'base_url = "{base_url}"\nwire_api = "responses"\nenv_key = "CONTEXTGATE_BENCH_KEY"\n'
    )
    env = {**os.environ, "CODEX_HOME": str(home), "CONTEXTGATE_BENCH_KEY": "sk-codex"}
    prompt = "Read every module under src/ with cat, one file at a time, then say you are done."
    done = subprocess.run(
        [str(codex), "exec", "--skip-git-repo-check", "-C", str(work), prompt],
        env=env, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.returncode, done.stdout[-400:] + done.stderr[-1500:]


def codex_outcomes(
    files: int, scale: float, tmp: Path, budget: int, window: int
) -> tuple[list[Outcome], dict[str, Any]]:
    codex = npm_agent(*CODEX)
    if isinstance(codex, str):
        raise SystemExit(codex)
    with FakeUpstream(token_scale=scale) as fake:
        work = tmp / "codex-work"
        paths = write_files(work / "src", files)
        database = tmp / "codex.db"
        env = {
            "CONTEXTGATE_CONFIG": str(_config(tmp, fake, window)),
            "CONTEXTGATE_PLANNER_MODEL": "fake-planner",  # not Codex's model: its script
            "CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer",
            # Codex sends store: false; an operator who wants its context managed says so
            "CONTEXTGATE_RESPONSES_STORE_FALSE": "manage",
        }
        with (
            Contextgate(tmp, fake.base_url, f"sqlite+aiosqlite:///{database}", extra_env=env)
            as server,
            Recorder(server.base_url.removesuffix("/v1")) as recorder,
        ):  # fmt: skip
            fake.script(MODEL, _script(paths))
            code, output = _run_codex(codex, recorder.url + "/v1", tmp / "codex-home", work)
            sent = [
                Call("responses", body) for path, body in recorder.bodies
                if path.endswith("/responses") and isinstance(body, dict)
            ]  # fmt: skip
            upstream = calls_of(fake, "chat", MODEL, False)
            log = server_log(database, MODEL)
    reference = measure(sent, budget, scale)
    figures = measure(upstream, budget, scale, int(code != 0))
    shape = f"Codex CLI, {files} reads, {budget // 1000}k"
    outcomes = [
        Outcome(shape, scale, "direct (Codex's requests)", budget, reference, reference),
        Outcome(shape, scale, "contextgate", budget, figures, reference, log),
    ]
    return outcomes, {"returncode": code, "finished": FINAL in output, "tail": output[-300:]}
