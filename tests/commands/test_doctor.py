"""Issue 17 point 2: ``contextgate doctor`` as a subprocess against real configs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from app.llm.reach import PROVIDER_KEY_VARIABLES
from tests.fake_upstream import FakeUpstream
from tests.support.models import fake_model_list
from tests.support.proxy import REPO


def doctor(env: dict[str, str], cwd: Path) -> tuple[int, list[str]]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTGATE_")}
    for name in PROVIDER_KEY_VARIABLES:
        clean.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "doctor"],
        cwd=cwd,  # not the repository: no .env read
        env={**clean, "PYTHONPATH": str(REPO), "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    return done.returncode, done.stdout.splitlines()


def _line(lines: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(prefix))


def test_unroutable_helper_models_and_missing_keys_are_red_with_the_fix(
    fake_upstream: FakeUpstream, tmp_path: Path, sqlite_url: str
) -> None:
    config = fake_model_list(tmp_path, fake_upstream, names=("local",))
    listed = orjson.loads(config.read_bytes())
    keyless = {"model": "anthropic/claude-3-5-sonnet-20240620"}  # a hosted model, no key set
    listed["model_list"].append({"model_name": "claude", "litellm_params": keyless})
    config.write_bytes(orjson.dumps(listed))
    code, lines = doctor(
        {"CONTEXTGATE_DATABASE_URL": sqlite_url, "CONTEXTGATE_CONFIG": str(config)}, tmp_path
    )
    assert code == 1, lines
    assert any(line.startswith("✓ model local") for line in lines), lines
    for role in ("planner", "summarizer"):
        index = _line(lines, f"✗ {role} model")
        assert "gpt-4o-mini" in lines[index]
        assert "not in the model_list" in lines[index]
        assert f"CONTEXTGATE_{role.upper()}_MODEL" in lines[index + 1]
        assert "one of: local, claude" in lines[index + 1]
    index = _line(lines, "✗ model claude")
    assert "ANTHROPIC_API_KEY" in lines[index]
    assert "api_key" in lines[index + 1]


def test_helper_models_served_by_the_list_are_green(
    fake_upstream: FakeUpstream, tmp_path: Path, sqlite_url: str
) -> None:
    config = fake_model_list(tmp_path, fake_upstream, names=("local", "fake-planner"))
    code, lines = doctor(
        {
            "CONTEXTGATE_DATABASE_URL": sqlite_url,
            "CONTEXTGATE_CONFIG": str(config),
            "CONTEXTGATE_PLANNER_MODEL": "fake-planner",
            "CONTEXTGATE_SUMMARIZER_MODEL": "local",
        },
        tmp_path,
    )
    assert code == 0, lines
    assert any(line.startswith("✓ planner model") for line in lines), lines
    assert not any(line.startswith("✗") for line in lines), lines


def test_no_upstream_and_no_provider_key_is_not_green(tmp_path: Path, sqlite_url: str) -> None:
    code, lines = doctor({"CONTEXTGATE_DATABASE_URL": sqlite_url}, tmp_path)
    assert code == 1, lines
    index = _line(lines, "✗ upstream")
    assert "no provider key" in lines[index]
    assert "CONTEXTGATE_UPSTREAM_BASE_URL" in lines[index + 1]
    assert "--demo" in lines[index + 1]
