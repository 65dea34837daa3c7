"""Issue 17 point 8: ``contextgate conversations list|show`` at 80 columns, piped, and --json."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from app.cli import app as cli_app
from tests.support.operator_data import Seeded, seed_conversation
from tests.support.proxy import REPO

BOX = set("│┃─━┏┓┗┛┡┩╇╭╮╰╯")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


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


def in_terminal(database_url: str, columns: int, *args: str) -> str:
    """The real command with its stdout a pseudo-terminal of ``columns`` columns (no COLUMNS
    variable: the width is the terminal's own), as a user at a shell runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTGATE_")}
    for name in ("COLUMNS", "LINES", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR"):
        env.pop(name, None)
    env.update(
        PYTHONPATH=str(REPO), CONTEXTGATE_DATABASE_URL=database_url, NO_COLOR="1", TERM="xterm"
    )
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "conversations", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
        )
        os.close(slave)
        chunks: list[bytes] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last writer exited
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif process.poll() is not None:
                break
        _, errors = process.communicate(timeout=30)
        assert process.returncode == 0, errors.decode()
    finally:
        os.close(master)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    return ANSI.sub("", text)


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


def test_list_in_a_real_80_column_terminal(seeded: Seeded, app_database_url: str) -> None:
    """``conversations list`` on a terminal (not a pipe) of 80 columns: lines that fit, every
    field there; the same terminal at 200 columns gets the table, so the width decided."""
    narrow = in_terminal(app_database_url, 80, "list")
    _readable(narrow)
    lines = narrow.splitlines()
    assert lines[0] == "conversations (1), newest first"
    [row] = [line for line in lines if line.startswith(seeded.conversation_id)]
    assert "  gpt-4o-mini  " in row  # the seeded conversation's model
    assert "tenant default" in row
    [counts] = [line for line in lines if line.lstrip().startswith("messages ")]
    assert f"requests {seeded.request_count}" in counts
    assert counts.rstrip().endswith("UTC")
    wide = in_terminal(app_database_url, 200, "list")
    assert BOX & set(wide), wide  # the table, with every column
    assert seeded.conversation_id in wide
