"""Settings: environment and .env, validated at start; a bad value is one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.settings import Settings, SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No CONTEXTGATE_* from the outside, and a working directory without a .env."""
    for name in list(os.environ):
        if name.startswith("CONTEXTGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_defaults_are_the_contracts() -> None:
    settings = load_settings()
    assert settings.database_url == "sqlite+aiosqlite:///./contextgate.db"
    assert settings.redis_url is None
    assert settings.config is None
    assert settings.upstream_base_url is None
    assert settings.upstream_api_key is None
    assert settings.planner_model == "gpt-4o-mini"
    assert settings.summarizer_model == "gpt-4o-mini"
    assert settings.embedding_model is None
    assert settings.master_key is None
    assert settings.request_timeout_s == 600
    assert settings.is_sqlite


def test_environment_is_read_with_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTGATE_REQUEST_TIMEOUT_S", "12.5")
    monkeypatch.setenv("CONTEXTGATE_UPSTREAM_BASE_URL", "http://127.0.0.1:11434/v1/")
    monkeypatch.setenv("CONTEXTGATE_UPSTREAM_API_KEY", "sk-secret")
    monkeypatch.setenv("CONTEXTGATE_DATABASE_URL", "postgresql+asyncpg://u:p@db/contextgate")
    monkeypatch.setenv("REQUEST_TIMEOUT_S", "1")  # no prefix: not ours
    settings = load_settings()
    assert settings.request_timeout_s == 12.5
    assert settings.upstream_base_url == "http://127.0.0.1:11434/v1"
    assert settings.upstream_api_key is not None
    assert settings.upstream_api_key.get_secret_value() == "sk-secret"
    assert "sk-secret" not in repr(settings)
    assert not settings.is_sqlite


def test_dotenv_is_read_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, clean_environment: Path
) -> None:
    (clean_environment / ".env").write_text(
        "CONTEXTGATE_PLANNER_MODEL=fake-planner\nCONTEXTGATE_REQUEST_TIMEOUT_S=30\n"
    )
    monkeypatch.setenv("CONTEXTGATE_REQUEST_TIMEOUT_S", "45")
    settings = load_settings()
    assert settings.planner_model == "fake-planner"
    assert settings.request_timeout_s == 45


def test_empty_values_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTGATE_REDIS_URL", "")
    monkeypatch.setenv("CONTEXTGATE_MASTER_KEY", "")
    settings = load_settings()
    assert settings.redis_url is None
    assert settings.master_key is None


def test_log_level_is_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTGATE_LOG_LEVEL", "debug")
    assert load_settings().log_level == "DEBUG"


def test_settings_are_frozen() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    with pytest.raises(Exception, match="frozen"):
        settings.request_timeout_s = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("REQUEST_TIMEOUT_S", "-1", "greater than 0"),
        ("REQUEST_TIMEOUT_S", "soon", "valid number"),
        ("DATABASE_URL", "sqlite:///./x.db", "async driver"),
        ("DATABASE_URL", "postgresql://u@h/db", "async driver"),
        ("DATABASE_URL", "mysql+pymysql://u@h/db", "not an async driver"),
        ("DATABASE_URL", "nosuchdb+driver://x", "not a usable SQLAlchemy URL"),
        ("DATABASE_URL", "contextgate.db", "SQLAlchemy URL"),
        ("REDIS_URL", "http://localhost:6379", "redis://"),
        ("UPSTREAM_BASE_URL", "localhost:11434", "http(s)://"),
        ("CONFIG", "/no/such/models.yaml", "no such file"),
        ("MAX_RETRIES", "99", "less than or equal to 10"),
        ("LOG_LEVEL", "LOUD", "'DEBUG'"),
    ],
)
def test_bad_value_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, reason: str
) -> None:
    monkeypatch.setenv(f"CONTEXTGATE_{name}", value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert message.startswith(f"invalid setting CONTEXTGATE_{name}: ")
    assert reason in message
    assert "\n" not in message
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


CLI_CASES = [
    (
        {"CONTEXTGATE_REQUEST_TIMEOUT_S": "-1"},
        "contextgate: invalid setting CONTEXTGATE_REQUEST_TIMEOUT_S: ",
    ),
    (
        # A well-formed URL to a database that cannot be opened: still one line.
        {"CONTEXTGATE_DATABASE_URL": "sqlite+aiosqlite:////no/such/dir/x.db"},
        "contextgate: cannot migrate the database: ",
    ),
]


def test_serve_with_a_bad_setting_exits_with_one_line(tmp_path: Path) -> None:
    """``contextgate serve`` itself: non-zero exit, one line on stderr, no traceback.

    The cases run side by side: each process pays the CLI's start-up once.
    """
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTGATE_")}
    command = [str(Path(sys.executable).parent / "contextgate"), "serve", "--port", "1"]
    processes = [
        subprocess.Popen(
            command,
            cwd=tmp_path,
            env={**clean, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env, _ in CLI_CASES
    ]
    for process, (_, expected) in zip(processes, CLI_CASES, strict=True):
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode != 0
        lines = stderr.splitlines()
        assert len(lines) == 1, stderr
        assert lines[0].startswith(expected), stderr
        assert "Traceback" not in stderr + stdout
