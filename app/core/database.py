"""Async engine and sessions; SQLite tuned for a server (WAL, busy timeout, BEGIN IMMEDIATE)."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict

import orjson
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, ExceptionContext
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry, Pool, StaticPool

from app.core import sqlite_driver
from app.core.errors import DatabaseUnavailable
from app.core.sqlite_lanes import Lanes
from app.core.wal_checkpoint import WalCheckpointer

__all__ = ["Database", "create_database"]

logger = logging.getLogger(__name__)

_BEGIN_MODE = "sqlite_begin"
_BEGIN_STATEMENTS = {mode: f"BEGIN {mode}" for mode in ("DEFERRED", "IMMEDIATE", "EXCLUSIVE")}


@dataclass(frozen=True, slots=True)
class Database:
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    is_sqlite: bool
    # SQLite has one writer at a time: queue this process's writers here (FIFO, no pool
    # connection held while waiting) instead of in SQLite's busy handler, which is unfair
    # and can starve a writer past the busy timeout under load.
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The server's SQLite file: its log checkpointed off the event loop (wal_checkpoint.py).
    checkpointer: WalCheckpointer | None = None
    # A SQLite file's transactions on connections of their own, SQLite's BEGIN and COMMIT
    # without SQLAlchemy's session machinery (sqlite_lanes.py).
    lanes: Lanes | None = None

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncSession]:
        """A read transaction; under WAL it never waits for writers. On a SQLite file it
        runs on a lane (sqlite_lanes.py); past the lanes its connection is taken at once, so
        the hot path's statements run on it directly too (app/db/sqlite_core.py)."""
        if self.lanes is not None:
            async with self.lanes.transaction(immediate=False, commit=False) as lane_session:
                if lane_session is not None:
                    yield lane_session
                    return
        session = self.sessionmaker()
        try:
            if self.is_sqlite:
                await session.connection()
            yield session
        finally:
            await self._close(session)

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[AsyncSession]:
        """A write transaction that commits on success and rolls back on error.

        On SQLite it starts with BEGIN IMMEDIATE: a deferred transaction that reads and then
        writes fails at once with "database is locked" when another writer got there first,
        whereas an immediate one waits for the lock (up to the busy timeout) before reading.
        """
        if not self.is_sqlite:
            async with self._transaction() as session:
                yield session
            return
        async with self.write_lock:
            if self.lanes is not None:
                async with self.lanes.transaction(immediate=True, commit=True) as lane_session:
                    if lane_session is not None:
                        yield lane_session
                        return
            async with self._transaction(immediate=True) as session:
                yield session

    @asynccontextmanager
    async def _transaction(self, *, immediate: bool = False) -> AsyncIterator[AsyncSession]:
        session = self.sessionmaker()
        try:
            if immediate:
                await session.connection(execution_options={_BEGIN_MODE: "IMMEDIATE"})
            try:
                yield session
                await session.commit()
            except BaseException:
                await session.rollback()
                raise
        finally:
            await self._close(session)

    async def _close(self, session: AsyncSession) -> None:
        """What ``async with session`` does on exit. On SQLite the close runs inline (the
        driver neither waits to roll back nor to hand the connection back to the pool), so
        it is awaited directly: the session's own exit runs it in a task of its own, shielded
        from cancellation, a task and a loop iteration per session, two per chat request."""
        if self.is_sqlite:
            await session.close()
        else:
            await session.__aexit__(None, None, None)

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def dispose(self) -> None:
        if self.lanes is not None:
            await self.lanes.close()
        if self.checkpointer is not None:
            await asyncio.to_thread(self.checkpointer.stop)
        await self.engine.dispose()


def _install_unavailable_errors(engine: AsyncEngine) -> None:
    """A database that cannot be reached answers 503 ``database_unavailable`` (Retry-After),
    not a 500: connecting failed (server down, restarting, refusing connections), a
    connection broke mid-statement, or SQLite stayed locked past the busy timeout. A pre-ping
    that finds a dead pooled connection is left to SQLAlchemy, which reconnects."""

    @event.listens_for(engine.sync_engine, "handle_error")
    def _on_error(context: ExceptionContext) -> BaseException | None:
        if context.is_pre_ping:
            return None
        locked = "database is locked" in str(context.original_exception)
        if context.connection is None or context.is_disconnect or locked:
            error = context.original_exception
            logger.warning(
                "database unavailable", extra={"error": f"{type(error).__name__}: {error}"[:300]}
            )
            return DatabaseUnavailable()
        return None


def _install_sqlite_pragmas(
    engine: AsyncEngine, memory: bool, *, background_checkpoints: bool
) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Let SQLAlchemy (not the driver) emit BEGIN, so we choose its mode.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        if background_checkpoints:  # never on a commit, on the event loop's thread
            cursor.execute("PRAGMA wal_autocheckpoint=0")
        # 0: the driver waits for a busy database with async sleeps (sqlite_driver.py).
        cursor.execute("PRAGMA busy_timeout=0")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(_BEGIN_MODE, "DEFERRED")
        adapted = conn.connection.dbapi_connection
        if _in_transaction(adapted):
            return  # a lane's session joining the transaction its lane began (sqlite_lanes.py)
        # Straight to the driver's cursor: exec_driver_sql's execution context cost more
        # than the BEGIN itself, twice per chat request.
        cursor = adapted.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(_BEGIN_STATEMENTS.get(mode, "BEGIN"))
        finally:
            cursor.close()


def _in_transaction(adapted: Any) -> bool:
    driver = getattr(adapted, "_connection", None)
    return isinstance(driver, sqlite_driver.InlineConnection) and driver._conn.in_transaction


def _json_dumps(value: object) -> str:
    """orjson for JSON columns (several times json's speed); json for what orjson refuses
    (integers past 64 bits)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


class _EngineOptions(TypedDict, total=False):
    """``create_async_engine``'s pool options, per database."""

    async_creator: Callable[[], Awaitable[sqlite_driver.InlineConnection]]
    module: object
    poolclass: type[Pool]
    pool_size: int
    max_overflow: int
    pool_pre_ping: bool


def create_database(
    url: str,
    *,
    pool_size: int = 10,
    busy_timeout_ms: int = 30_000,
    background_checkpoints: bool = False,
) -> Database:
    """The engine and sessions for ``url``. ``background_checkpoints`` (the server): a SQLite
    file's log is checkpointed by a thread of its own instead of by a committing request."""
    is_sqlite = url.startswith("sqlite")
    kwargs: _EngineOptions = {}
    memory = is_sqlite and (":memory:" in url or url.rstrip("/").endswith("sqlite+aiosqlite:"))
    if is_sqlite:
        kwargs["async_creator"] = sqlite_driver.async_creator(url, busy_timeout_ms=busy_timeout_ms)
        kwargs["module"] = sqlite_driver.dbapi  # statements run from the greenlet, no loop trip
    if memory:
        kwargs["poolclass"] = StaticPool
    elif is_sqlite:
        kwargs["pool_size"] = pool_size
        kwargs["max_overflow"] = pool_size
    else:
        kwargs["pool_size"] = pool_size
        kwargs["max_overflow"] = pool_size
        kwargs["pool_pre_ping"] = True
    engine = create_async_engine(
        url, json_serializer=_json_dumps, json_deserializer=orjson.loads, **kwargs
    )
    _install_unavailable_errors(engine)
    checkpointer = None
    if is_sqlite and not memory and background_checkpoints:
        checkpointer = _checkpointer(url)
    if is_sqlite:
        _install_sqlite_pragmas(engine, memory, background_checkpoints=checkpointer is not None)
    return Database(
        engine=engine,
        sessionmaker=async_sessionmaker(engine, expire_on_commit=False),
        is_sqlite=is_sqlite,
        checkpointer=checkpointer,
        lanes=Lanes(engine, pool_size) if is_sqlite and not memory else None,
    )


def _checkpointer(url: str) -> WalCheckpointer:
    args, kwargs = sqlite_driver.connect_args(url)
    kwargs["check_same_thread"] = False  # opened, used and closed on the checkpointer's thread
    path = str(args[0]) if args else str(kwargs.get("database", ""))
    if path.startswith("file:"):  # a URI: the file is what comes before its query
        path = path.removeprefix("file:").split("?", 1)[0]
    checkpointer = WalCheckpointer(lambda: sqlite3.connect(*args, **kwargs), path)
    checkpointer.start()
    return checkpointer
