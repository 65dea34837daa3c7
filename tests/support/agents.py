"""Real agents (npm packages) installed into a folder the tests own, for acceptance tests.

``make test`` installs them first (``make agents``); a test that finds one missing installs it
the same way, and skips, saying why, only when npm is missing or cannot install it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["AGENTS_DIR", "CLAUDE_CODE", "CODEX", "npm_agent"]

REPO = Path(__file__).resolve().parents[2]
AGENTS_DIR = REPO / "test-artifacts" / "agents"
# The version the acceptance test was written against (Makefile: CLAUDE_CODE_VERSION).
CLAUDE_CODE = ("@anthropic-ai/claude-code@2.1.197", "claude-code", "claude")
# The Codex CLI (Makefile: CODEX_VERSION); its native binary ships in an npm package.
CODEX = ("@openai/codex@0.169.0", "codex", "codex")


def npm_agent(package: str, folder: str, binary: str, timeout: float = 600) -> Path | str:
    """The agent's executable, installing it if needed; a string saying why when it cannot."""
    prefix = AGENTS_DIR / folder
    executable = prefix / "node_modules" / ".bin" / binary
    if executable.exists():
        return executable
    npm = shutil.which("npm")
    if npm is None:
        return f"npm is not installed, so {package} cannot be installed"
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"npm install {package} took longer than {timeout:g} s"
    if done.returncode != 0 or not executable.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return f"npm could not install {package}: {' / '.join(tail)}"
    return executable
