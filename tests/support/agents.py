"""Real agents (npm packages) installed into a folder the tests own, for acceptance tests.

``make test`` installs them first (``make agents``); a test that finds one missing installs it
the same way, and skips, saying why, only when npm is missing or cannot install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["AGENTS_DIR", "CLAUDE_CODE", "CODEX", "Codex", "codex_cli", "npm_agent"]

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


@pytest.fixture(scope="module")
def codex_cli() -> Path:
    """The Codex CLI's executable (installed if missing); the test skips, saying why, without."""
    found = npm_agent(*CODEX)
    if isinstance(found, str):
        pytest.skip(found)
    return found


@dataclass(frozen=True)
class Codex:
    """One user of the Codex CLI: its ``CODEX_HOME`` (config.toml), a working folder, and the
    environment variable its configuration reads the API key from."""

    executable: Path
    home: Path
    work: Path
    key_variable: str

    @classmethod
    def _made(cls, executable: Path, folder: Path, config: str, key_variable: str) -> Codex:
        home, work = folder / "codex-home", folder / "work"
        home.mkdir()
        work.mkdir()
        (home / "config.toml").write_text(config)
        return cls(executable, home, work, key_variable)

    @classmethod
    def openai_provider(
        cls, executable: Path, folder: Path, model: str, base_url: str, *, compact_at: int
    ) -> Codex:
        """Codex's built-in OpenAI provider pointed at ``base_url``, compacting remotely once
        its history passes ``compact_at`` tokens."""
        config = (
            f'model = "{model}"\n'
            f'openai_base_url = "{base_url}"\n'
            f"model_auto_compact_token_limit = {compact_at}\n"
        )
        return cls._made(executable, folder, config, "OPENAI_API_KEY")

    @classmethod
    def responses_provider(cls, executable: Path, folder: Path, model: str, base_url: str) -> Codex:
        """A model provider of its own whose ``wire_api`` is ``responses`` at ``base_url``."""
        config = (
            f'model = "{model}"\n'
            'model_provider = "contextgate"\n'
            "[model_providers.contextgate]\n"
            'name = "contextgate"\n'
            f'base_url = "{base_url}"\n'
            'wire_api = "responses"\n'
            'env_key = "CONTEXTGATE_TEST_KEY"\n'
        )
        return cls._made(executable, folder, config, "CONTEXTGATE_TEST_KEY")

    def exec(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``codex exec`` with these arguments (a prompt, or ``resume --last`` and one)."""
        env = {**os.environ, "CODEX_HOME": str(self.home), self.key_variable: "sk-codex"}
        return subprocess.run(
            [str(self.executable), "exec", "--skip-git-repo-check", "-C", str(self.work), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
