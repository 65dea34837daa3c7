"""The CLI through typer's runner, as the tests drive it: wide, plain output, no colour."""

from __future__ import annotations

from typer.testing import CliRunner

from app.cli import app as cli_app

__all__ = ["MASTER", "WIDE", "invoke", "invoke_on"]

MASTER = "sk-master-cli-keys"
WIDE = {"COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}


def invoke(env: dict[str, str], *args: str) -> tuple[int, str]:
    """Exit code and output of ``contextgate <args>`` with these environment variables."""
    result = CliRunner().invoke(cli_app, list(args), env={**WIDE, **env})
    return result.exit_code, result.output


def invoke_on(database_url: str, *args: str, master: str | None = MASTER) -> tuple[int, str]:
    """The CLI on that database, the master key set (or not); it calls asyncio.run, so async
    tests call this through a thread."""
    env = {"CONTEXTGATE_DATABASE_URL": database_url}
    if master is not None:
        env["CONTEXTGATE_MASTER_KEY"] = master
    return invoke(env, *args)
