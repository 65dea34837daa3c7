"""Real Claude Code (``claude -p``) reading files, offline, for acceptance tests and bench/.

The fake upstream's answers are scripted (``read_script``): a ``Read`` of each file in turn,
then a final text; Claude Code runs each Read itself and sends the file back as a
``tool_result``, the whole history on every call, with thinking on (``MAX_THINKING_TOKENS``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

from app.tokens.counter import TokenCounter

__all__ = ["FINAL", "SMALL_UPSTREAM", "UPSTREAM", "read_script", "run_claude", "write_files"]

UPSTREAM = "claude-sonnet-4-5-20250929"  # the main model as the upstream sees it
SMALL_UPSTREAM = "claude-haiku-4-5-20251001"  # Claude Code's small fast model
FINAL = "All files read."
WORDS = (
    "def class return import self value result config request response handler session "
    "token budget message history cache prefix index query async await raise error field "
    "model state append window region engine planner tool call assert test fixture"
).split()
_counter = TokenCounter()


def _code(rng: random.Random, tokens: int) -> str:
    lines: list[str] = []
    encoding = _counter.encoding("gpt-4o")
    while len(lines) % 40 or _counter.count_text("\n".join(lines), "gpt-4o") < tokens:
        indent = "    " * rng.randint(0, 3)
        lines.append(indent + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))))
    return encoding.decode(encoding.encode("\n".join(lines))[:tokens]) + "\n"


def write_files(
    folder: Path, count: int, tokens: tuple[int, int] = (3000, 8000), seed: int = 27
) -> list[Path]:
    """``count`` code-like files of ``tokens`` (min, max) tiktoken tokens under ``folder``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"module_{i}.py"
        path.write_text(_code(rng, rng.randint(*tokens)))
        paths.append(path)
    return paths


def read_script(paths: list[Path]) -> list[str | dict[str, Any]]:
    """The main model's answers: a ``Read`` of each path in turn, then ``FINAL``."""
    reads: list[str | dict[str, Any]] = [
        {"tool_calls": [{"name": "Read", "arguments": {"file_path": str(path)}}]} for path in paths
    ]
    return [*reads, {"content": FINAL}]


def run_claude(
    claude: Path,
    base_url: str,
    key: str,
    home: Path,
    prompt: str,
    *,
    model: str,
    small_model: str,
    timeout: float = 1200,
) -> dict[str, Any]:
    """``claude -p prompt`` in ``home``/work with only the Read tool; its JSON result."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": key,
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": small_model,
        "MAX_THINKING_TOKENS": "2048",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(claude), "-p", prompt, "--allowedTools", "Read", "--output-format", "json"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = done.stdout.strip().splitlines()
    if not lines:
        return {"is_error": True, "result": done.stderr[-2000:], "returncode": done.returncode}
    result: dict[str, Any] = json.loads(lines[-1])
    result["returncode"] = done.returncode
    return result
