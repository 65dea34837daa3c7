"""``serve`` skips alembic on a SQLite database already at every head (app/commands/
migrations.py): the heads it reads from the scripts are alembic's, and anything else (a fresh
file, a database behind, another backend, scripts it does not understand) leaves it to
alembic."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from app import cli
from app.commands.migrations import alembic_config, script_heads, sqlite_at_heads


def test_the_scripts_heads_are_alembics() -> None:
    from alembic.script import ScriptDirectory

    config = alembic_config("sqlite://")
    assert script_heads() == set(ScriptDirectory.from_config(config).get_heads())  # type: ignore[arg-type]


def test_a_migrated_database_is_at_heads_and_one_behind_is_not(
    sqlite_url: str, tmp_path: Path
) -> None:
    assert sqlite_at_heads(sqlite_url)
    with sqlite3.connect(tmp_path / "contextgate.db") as db:
        db.execute("DELETE FROM alembic_version WHERE version_num = ?", (min(script_heads()),))
    assert not sqlite_at_heads(sqlite_url)


def test_what_it_cannot_tell_is_left_to_alembic(tmp_path: Path) -> None:
    assert not sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'missing.db'}")
    sqlite3.connect(tmp_path / "empty.db").close()
    assert not sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    assert not sqlite_at_heads("sqlite+aiosqlite:///:memory:")
    assert not sqlite_at_heads("postgresql+asyncpg://u:p@127.0.0.1:9/db")


def _script(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(f'"""{name}"""\n{body}\n', encoding="utf-8")


def test_merges_count_and_unknown_shapes_give_no_heads(tmp_path: Path) -> None:
    _script(tmp_path, "a", 'revision: str = "a"\ndown_revision = None')
    _script(tmp_path, "b", "revision = 'b'\ndown_revision: str | None = 'a'")
    _script(tmp_path, "c", 'revision = "c"\ndown_revision = "a"')
    assert script_heads(tmp_path) == {"b", "c"}
    _script(tmp_path, "m", 'revision = "m"\ndown_revision = ("b", "c")')
    assert script_heads(tmp_path) == {"m"}
    _script(tmp_path, "d", 'revision = "d"\ndown_revision = "m"\ndepends_on = "x"')
    assert script_heads(tmp_path) == set()
    _script(tmp_path, "d", 'revision = make_id()\ndown_revision = "m"')
    assert script_heads(tmp_path) == set()


def test_serve_at_heads_neither_migrates_nor_forks(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("nothing to migrate")

    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(cli, "_migrate_or_exit", refuse)
    cli._migrate_apart_or_exit(sqlite_url)
