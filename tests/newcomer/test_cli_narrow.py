"""Issue 17 point 8: ``contextgate conversations list|show`` at 80 columns, piped, and --json."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from app.cli import app as cli_app
from tests.support.operator_data import Seeded, seed_conversation
from tests.support.proxy import REPO

BOX = set("│┃─━┏┓┗┛┡┩╇╭╮╰╯")


@pytest.fixture
async def seeded(client: httpx.AsyncClient) -> Seeded:
    return await seed_conversation(client)


def piped(sqlite_url: str, *args: str) -> str:
    """The real command with its stdout a pipe, as `contextgate … | less` runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTGATE_")}
    env.update(COLUMNS="80", PYTHONPATH=str(REPO), CONTEXTGATE_DATABASE_URL=sqlite_url)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "conversations", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _readable(output: str) -> None:
    assert output.strip()
    assert not BOX & set(output), "tables in plain output"
    too_long = [line for line in output.splitlines() if len(line) > 80]
    assert too_long == []


def test_piped_list_and_show_are_plain_and_fit_80_columns(seeded: Seeded, sqlite_url: str) -> None:
    listed = piped(sqlite_url, "list")
    _readable(listed)
    assert seeded.conversation_id in listed
    assert f"requests {seeded.request_count}" in listed
    shown = piped(sqlite_url, "show", seeded.conversation_id)
    _readable(shown)
    assert "What is the weather in Paris?" in shown
    assert "get_weather" in shown
    for request_id in seeded.request_ids:
        assert request_id in shown


def test_a_terminal_of_80_columns_gets_lines_not_clipped_tables(
    seeded: Seeded, sqlite_url: str
) -> None:
    env = {"CONTEXTGATE_DATABASE_URL": sqlite_url, "TTY_COMPATIBLE": "1", "NO_COLOR": "1"}
    narrow = CliRunner().invoke(
        cli_app, ["conversations", "show", seeded.conversation_id], env={**env, "COLUMNS": "80"}
    )
    assert narrow.exit_code == 0, narrow.output
    _readable(narrow.output)
    wide = CliRunner().invoke(cli_app, ["conversations", "list"], env={**env, "COLUMNS": "200"})
    assert wide.exit_code == 0, wide.output
    assert BOX & set(wide.output)  # a wide terminal keeps the table


def test_json_for_scripts(seeded: Seeded, sqlite_url: str) -> None:
    listed = orjson.loads(piped(sqlite_url, "list", "--json"))
    assert [row["id"] for row in listed] == [seeded.conversation_id]
    assert listed[0]["updated_at"].endswith("+00:00")  # UTC, with its zone
    shown = orjson.loads(piped(sqlite_url, "show", seeded.conversation_id, "--json"))
    assert shown["conversation"]["id"] == seeded.conversation_id
    assert {r["id"] for r in shown["requests"]} == set(seeded.request_ids)
    for request in shown["requests"]:
        # the parts shown add up to what was sent: the per-request overhead is one of them
        assert [part["name"] for part in request["parts"]][-1] == "overhead"
        assert sum(part["tokens"] for part in request["parts"]) == request["tokens_used"]
