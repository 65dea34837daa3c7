"""Issue 17 point 5: the compose file and .env.example as people run them (no Docker engine
here: the compose specification's JSON schema, via check-jsonschema's vendored copy)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


def _proxy() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    proxy: dict[str, Any] = document["services"]["proxy"]
    return proxy


def test_compose_file_is_valid_against_the_compose_specification() -> None:
    result = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.compose-spec", "docker-compose.yml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_reaches_the_host_on_linux_without_new_compose_features() -> None:
    proxy = _proxy()
    assert "host.docker.internal:host-gateway" in proxy["extra_hosts"]
    # The short form works on every Compose v2; `required: false` needs 2.24 or newer.
    assert proxy["env_file"] == [".env"]


def test_env_example_upstream_is_right_inside_compose() -> None:
    active = [
        line
        for line in (ROOT / ".env.example").read_text().splitlines()
        if re.match(r"^#?\s*CONTEXTGATE_UPSTREAM_BASE_URL=", line)
    ]
    assert active == ["# CONTEXTGATE_UPSTREAM_BASE_URL=http://host.docker.internal:11434/v1"]
