"""npm libraries (not agents) installed into a folder the tests own, for client tests in node.

Like ``tests/support/agents.py``: installed on first use under test-artifacts/, and a test
skips, saying why, only when npm is missing or cannot install them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.agents import REPO

__all__ = ["AI_SDK", "npm_libraries"]

# The Vercel AI SDK and its OpenAI provider, at the versions the test was written against.
AI_SDK = ("ai-sdk", ("ai@7.0.173", "@ai-sdk/openai@4.0.118"))


def npm_libraries(folder: str, packages: tuple[str, ...], timeout: float = 600) -> Path | str:
    """The folder holding ``node_modules`` with ``packages``, installing them if needed; a
    string saying why when they cannot be installed."""
    prefix = REPO / "test-artifacts" / folder
    names = [package.rsplit("@", 1)[0] for package in packages]
    if all((prefix / "node_modules" / name / "package.json").exists() for name in names):
        return prefix
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return f"node/npm is not installed, so {' '.join(packages)} cannot be installed"
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *packages],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"npm install {' '.join(packages)} took longer than {timeout:g} s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return f"npm could not install {' '.join(packages)}: {' / '.join(tail)}"
    return prefix
