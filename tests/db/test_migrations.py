"""Alembic migrations on a real SQLite file: empty -> heads -> base -> heads, no model drift."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect
from sqlalchemy.ext.asyncio import create_async_engine

from app.commands.migrations import (
    alembic_config,
    create_sqlite_at_heads,
    sql_statements,
    sqlite_schema_dump,
)
from app.db.models import Base

CORE_TABLES = {"conversations", "messages", "request_logs"}


def _tables(path: Path) -> set[str]:
    engine = create_engine(f"sqlite:///{path}")
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _drift(path: Path) -> list[Any]:
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def _current_heads(path: Path) -> set[str]:
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            return set(MigrationContext.configure(connection).get_current_heads())
    finally:
        engine.dispose()


async def test_upgrade_to_heads_and_back_to_base(tmp_path: Path) -> None:
    path = tmp_path / "migrations.db"
    config: Any = alembic_config(f"sqlite+aiosqlite:///{path}")
    heads = set(ScriptDirectory.from_config(config).get_heads())

    # env.py runs its own event loop (asyncio.run): keep it off the test's loop.
    await asyncio.to_thread(command.upgrade, config, "heads")
    assert CORE_TABLES <= _tables(path)
    assert _current_heads(path) == heads
    assert _drift(path) == [], "the models and the migrations disagree"

    await asyncio.to_thread(command.downgrade, config, "base")
    assert _tables(path) <= {"alembic_version"}
    assert _current_heads(path) == set()

    await asyncio.to_thread(command.upgrade, config, "heads")
    assert CORE_TABLES <= _tables(path)
    assert _current_heads(path) == heads


async def test_upgrade_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "twice.db"
    config: Any = alembic_config(f"sqlite+aiosqlite:///{path}")
    await asyncio.to_thread(command.upgrade, config, "heads")
    before = _tables(path)
    await asyncio.to_thread(command.upgrade, config, "heads")
    assert _tables(path) == before


async def _async_tables(url: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            names = await connection.run_sync(lambda c: inspect(c).get_table_names())
            return set(names)
    finally:
        await engine.dispose()


async def test_round_trip_on_every_backend(database_url: str) -> None:
    """The fixture migrated to heads (SQLite and PostgreSQL); go down to base and up again."""
    config: Any = alembic_config(database_url)
    assert CORE_TABLES <= await _async_tables(database_url)
    await asyncio.to_thread(command.downgrade, config, "base")
    assert await _async_tables(database_url) <= {"alembic_version"}
    await asyncio.to_thread(command.upgrade, config, "heads")
    assert CORE_TABLES <= await _async_tables(database_url)


async def test_a_stored_ledger_becomes_the_base_part_of_its_conversation(tmp_path: Path) -> None:
    """0022: a ledger stored whole (one row per conversation) is kept as part 0, a base."""
    path = tmp_path / "ledger.db"
    config: Any = alembic_config(f"sqlite+aiosqlite:///{path}")
    await asyncio.to_thread(command.upgrade, config, "0021")
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as connection:
            # (SQLite checks foreign keys only when asked to: no conversation row needed.)
            connection.exec_driver_sql(
                "INSERT INTO prompt_ledgers VALUES ('conv_1', 't1', 3, 1, 5, 'sys', '', 40, 10, "
                "0, 'chain', 0, 0, 0, X'5B5D', X'5B5D', '2026-11-27')"
            )
        await asyncio.to_thread(command.upgrade, config, "0022")
        with engine.connect() as connection:
            rows = connection.exec_driver_sql(
                "SELECT conversation_id, part, base_part, previous_chain, epoch, tokens, "
                "chain_hash FROM prompt_ledger_parts"
            ).all()
        assert [tuple(row) for row in rows] == [("conv_1", 0, 0, "", 3, 40, "chain")]
    finally:
        engine.dispose()


def _database(path: Path) -> tuple[list[str], dict[str, object]]:
    """Everything a SQLite file holds: its schema and rows (sqlite3's dump, in any order: the
    order alembic runs parallel branches in, and so creates their indexes in, varies from run
    to run), and the header fields a dump leaves out."""
    with sqlite3.connect(path) as db:
        pragmas = {
            name: db.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("user_version", "application_id", "journal_mode", "auto_vacuum")
            + ("encoding", "page_size", "freelist_count")
        }
    return sorted(sql_statements(sqlite_schema_dump(path))), pragmas


async def test_a_new_sqlite_database_from_the_schema_is_the_migrated_one(tmp_path: Path) -> None:
    """``serve`` creates a new SQLite database from migrations/sqlite_schema.sql instead of
    running every migration (app/commands/migrations.py): the same tables, columns in the same
    order, defaults, constraints, indexes, alembic_version rows. After a new migration this
    fails until the schema is written again: ``python -m app.commands.migrations``."""
    migrated = tmp_path / "migrated.db"
    await asyncio.to_thread(
        command.upgrade, alembic_config(f"sqlite+aiosqlite:///{migrated}"), "heads"
    )
    created = tmp_path / "created.db"
    assert create_sqlite_at_heads(f"sqlite+aiosqlite:///{created}")
    assert _database(created) == _database(migrated), (
        "migrations/sqlite_schema.sql is not what the migrations build: "
        "python -m app.commands.migrations"
    )
    assert _drift(created) == []
    assert _current_heads(created) == _current_heads(migrated)
    # and alembic finds it at heads: nothing to do, nothing changed; it goes down as one does
    config: Any = alembic_config(f"sqlite+aiosqlite:///{created}")
    await asyncio.to_thread(command.upgrade, config, "heads")
    assert _database(created) == _database(migrated)
    await asyncio.to_thread(command.downgrade, config, "base")
    assert _tables(created) <= {"alembic_version"}
