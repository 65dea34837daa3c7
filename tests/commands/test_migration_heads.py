"""``serve`` skips alembic on a SQLite database already at every head (app/commands/
migrations.py): the heads it reads from the scripts are alembic's, and anything else (a fresh
file, a database behind, another backend, scripts it does not understand) leaves it to
alembic. A new SQLite database it creates from the schema the migrations build (that the two
are the same: tests/db/test_migrations.py), only when the file is new and the schema at the
scripts' heads."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from app import cli
from app.commands import migrations
from app.commands.migrations import (
    alembic_config,
    create_sqlite_at_heads,
    script_heads,
    sqlite_at_heads,
)


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


def test_serve_creates_a_new_database_without_migrating_or_forking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("created, not migrated")

    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(cli, "_migrate_or_exit", refuse)
    url = f"sqlite+aiosqlite:///{tmp_path / 'new.db'}"
    cli._migrate_apart_or_exit(url)
    assert sqlite_at_heads(url)


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_a_new_database_is_created_at_heads(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'new.db'}"
    assert create_sqlite_at_heads(url)
    assert sqlite_at_heads(url)
    sqlite3.connect(tmp_path / "empty.db").close()  # an empty file is a new database too
    assert create_sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")


def test_only_a_new_database_is_created(sqlite_url: str, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "contextgate.db") as db:  # migrated (the fixture)
        db.execute("DELETE FROM alembic_version WHERE version_num = ?", (min(script_heads()),))
    assert not create_sqlite_at_heads(sqlite_url)  # one behind: alembic's
    assert not sqlite_at_heads(sqlite_url)
    with sqlite3.connect(tmp_path / "other.db") as db:
        db.execute("CREATE TABLE mine (x)")
    assert not create_sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}")
    assert _tables(tmp_path / "other.db") == {"mine"}
    assert not create_sqlite_at_heads("sqlite+aiosqlite:///:memory:")
    assert not create_sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}?mode=ro")
    assert not create_sqlite_at_heads("postgresql+asyncpg://u:p@127.0.0.1:9/db")
    assert not create_sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'no' / 'dir.db'}")


def test_a_schema_behind_the_scripts_is_left_to_alembic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration added since the schema was written: its heads are not the scripts'; the
    database is left empty (rolled back) for alembic."""
    schema = migrations.SQLITE_SCHEMA.read_text(encoding="utf-8")
    head = sorted(script_heads())[0]
    behind = tmp_path / "behind.sql"
    behind.write_text(schema.replace(f"VALUES('{head}');", "VALUES('0001');"), encoding="utf-8")
    assert behind.read_text(encoding="utf-8") != schema
    monkeypatch.setattr(migrations, "SQLITE_SCHEMA", behind)
    assert not create_sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'b.db'}")
    assert _tables(tmp_path / "b.db") == set()
    cut = tmp_path / "cut.sql"
    cut.write_text(schema[: len(schema) // 2], encoding="utf-8")  # ends mid-statement
    monkeypatch.setattr(migrations, "SQLITE_SCHEMA", cut)
    assert not create_sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    monkeypatch.setattr(migrations, "SQLITE_SCHEMA", tmp_path / "missing.sql")
    assert not create_sqlite_at_heads(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
