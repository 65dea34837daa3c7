"""SQLite for SQLAlchemy's asyncio engine, run on the event loop's own thread.

aiosqlite runs every sqlite3 call on a thread of its connection and hands the result back to
the event loop: a queue put, a thread wake-up, a ``call_soon_threadsafe``, and the two threads
taking turns on the GIL. Under SQLAlchemy's adapter one statement made four such trips; a chat
request made 31, and py-spy put a third of the server's samples on the queue put alone
(bench/README.md, "Speed and scale"). The statements themselves take microseconds: SQLite is a
library, in WAL mode readers never wait, and with ``synchronous=NORMAL`` a commit does not
fsync. So this driver runs them inline, where they cost less than the hand-off did.

The one thing that may wait is a writer behind another process's write lock (``--workers``
on one SQLite file, or the CLI). SQLite's own busy handler would sleep on the event loop's
thread; instead the connection's busy timeout is 0 and a busy statement is retried after an
``asyncio.sleep`` until the configured timeout, so the loop keeps serving meanwhile. A busy
statement has changed nothing, so running it again is safe; writers start with BEGIN IMMEDIATE
(app/core/database.py), so that is where they wait.

The classes mimic the part of ``aiosqlite.Connection`` that SQLAlchemy's aiosqlite dialect
uses; :func:`async_creator` plugs them in as the engine's ``async_creator``.

SQLAlchemy's asyncio adapter still hands every statement to the event loop: it runs in a
greenlet, and each cursor open, execute and close, each commit and rollback switches out of
it to await a coroutine and back in (three switches and an ``asyncio.Lock`` a statement).
:data:`dbapi` (the engine's ``module``) adapts the connection with :class:`InlineAdapted`
instead, whose cursors and transactions call sqlite3 straight from the greenlet and go
through the event loop only to wait for a busy database.
"""

from __future__ import annotations

import asyncio
import collections
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from greenlet import getcurrent  # type: ignore[import-untyped]
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
    SQLiteDialect_aiosqlite,
)
from sqlalchemy.engine import make_url
from sqlalchemy.util import EMPTY_DICT, await_

__all__ = [
    "InlineAdapted",
    "InlineConnection",
    "InlineCursor",
    "async_creator",
    "connect_args",
    "dbapi",
    "is_busy",
]

T = TypeVar("T")
Row = tuple[object, ...]
"""A row as sqlite3 gives it (the connection keeps its default row factory)."""

_FIRST_BACKOFF_S = 0.001
_MAX_BACKOFF_S = 0.05


def is_busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    message = str(error).lower()
    return "database is locked" in message or "database is busy" in message


class InlineCursor:
    """Executes, fetches every row and closes at once; reading it afterwards is free."""

    def __init__(self, connection: InlineConnection) -> None:
        self._connection = connection
        self._rows: list[Row] = []
        self.description: object = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def _run(self, method: str, sql: str, parameters: object) -> None:
        cursor = self._connection._conn.cursor()
        try:
            getattr(cursor, method)(sql, parameters)
            self.description = cursor.description
            self._rows = cursor.fetchall() if cursor.description else []
            self.rowcount = cursor.rowcount
            self.lastrowid = cursor.lastrowid
        finally:
            cursor.close()

    async def execute(self, sql: str, parameters: Iterable[object] | None = None) -> InlineCursor:
        await self._connection._call(self._run, "execute", sql, parameters or ())
        return self

    async def executemany(self, sql: str, parameters: Iterable[Iterable[object]]) -> InlineCursor:
        rows = list(parameters)  # a generator could not be replayed after a busy retry
        await self._connection._call(self._run, "executemany", sql, rows)
        return self

    async def fetchall(self) -> list[Row]:
        rows, self._rows = self._rows, []
        return rows

    async def fetchone(self) -> Row | None:
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Row]:
        count = size or self.arraysize
        rows, self._rows = self._rows[:count], self._rows[count:]
        return rows

    async def close(self) -> None:
        self._rows = []


class _InlineQueue:
    """SQLAlchemy's dialect sets ``isolation_level`` by queueing a call on aiosqlite's thread
    queue (``_tx``) and awaiting its future; here the call runs at once."""

    def put_nowait(self, item: tuple[asyncio.Future[object] | None, Callable[[], object]]) -> None:
        future, function = item
        try:
            result = function()
        except BaseException as error:  # handed to the awaiting caller, as aiosqlite does
            if future is not None and not future.done():
                future.set_exception(error)
            return
        if future is not None and not future.done():
            future.set_result(result)


class InlineConnection:
    """The subset of ``aiosqlite.Connection`` SQLAlchemy uses, without a thread."""

    def __init__(self, connection: sqlite3.Connection, busy_timeout_s: float) -> None:
        self._connection: sqlite3.Connection | None = connection
        self._busy_timeout_s = busy_timeout_s
        self._tx = _InlineQueue()

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("no active connection")
        return self._connection

    async def _call(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)``, retried after a short async sleep while the database is busy."""
        deadline: float | None = None
        backoff = _FIRST_BACKOFF_S
        while True:
            try:
                return function(*args)
            except sqlite3.OperationalError as error:
                if not is_busy(error):
                    raise
                now = time.monotonic()
                deadline = deadline if deadline is not None else now + self._busy_timeout_s
                if now >= deadline:
                    raise
                await asyncio.sleep(min(backoff, deadline - now))
                backoff = min(backoff * 2, _MAX_BACKOFF_S)

    def call_now(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` at once, from SQLAlchemy's greenlet; only a busy database
        goes through the event loop (``_call``'s async retries)."""
        try:
            return function(*args)
        except sqlite3.OperationalError as error:
            if not is_busy(error):
                raise
        return await_(self._call(function, *args))

    def cursor(self) -> InlineCursor:
        return InlineCursor(self)

    async def commit(self) -> None:
        await self._call(self._conn.commit)

    async def rollback(self) -> None:
        await self._call(self._conn.rollback)

    async def close(self) -> None:
        self.stop()

    def stop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level


class _Ready:
    """An awaitable that is done at once (it never yields to the event loop)."""

    def __await__(self) -> Any:
        return iter(())


_READY = _Ready()


def _note_async() -> None:
    """``AsyncConnection.execute`` checks that its statement went through the event loop (a
    sync driver would block it): once per SQLAlchemy greenlet, hand it a done awaitable. The
    statements themselves run inline (a busy database still waits asynchronously)."""
    current = getcurrent()
    if not current.__dict__.get("inline_noted"):
        current.inline_noted = True
        await_(_READY)


class InlineAdaptedCursor(AsyncAdapt_aiosqlite_cursor):
    """SQLAlchemy's cursor adapter over :class:`InlineCursor`, without the event loop: the
    statement runs, its rows are fetched and the sqlite3 cursor closed in one call."""

    __slots__ = ()
    _awaitable_cursor_close = False

    def __init__(self, adapt_connection: InlineAdapted) -> None:
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        connection: InlineConnection = adapt_connection._connection  # type: ignore[assignment]
        self._cursor = InlineCursor(connection)  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()

    def _run(self, method: str, operation: Any, parameters: Any) -> None:
        cursor: InlineCursor = self._cursor  # type: ignore[assignment]
        connection: InlineConnection = self._connection  # type: ignore[assignment]
        try:
            _note_async()
            if self._adapt_connection._execute_mutex.locked():  # another user is mid-retry
                await_(self._run_locked(method, operation, parameters))
            else:
                connection.call_now(cursor._run, method, operation, parameters)
        except Exception as error:
            self._adapt_connection._handle_exception(error)
        self._rows = collections.deque(cursor._rows)
        cursor._rows = []

    async def _run_locked(self, method: str, operation: Any, parameters: Any) -> None:
        cursor: InlineCursor = self._cursor  # type: ignore[assignment]
        connection: InlineConnection = self._connection  # type: ignore[assignment]
        async with self._adapt_connection._execute_mutex:
            await connection._call(cursor._run, method, operation, parameters)

    def execute(self, operation: Any, parameters: Any = None) -> None:
        self._run("execute", operation, () if parameters is None else parameters)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> None:
        # a generator could not be replayed after a busy retry
        self._run("executemany", operation, list(seq_of_parameters))

    def close(self) -> None:
        self._rows.clear()


class InlineAdapted(AsyncAdapt_aiosqlite_connection):
    """SQLAlchemy's connection adapter over :class:`InlineConnection`: cursors are
    :class:`InlineAdaptedCursor`, commit and rollback run at once."""

    __slots__ = ()
    _cursor_cls = InlineAdaptedCursor  # type: ignore[assignment]

    def _finish(self, name: str) -> None:
        connection: InlineConnection = self._connection  # type: ignore[assignment]
        if connection._connection is None:
            return
        try:
            connection.call_now(getattr(connection._connection, name))
        except Exception as error:
            self._handle_exception(error)

    def commit(self) -> None:
        self._finish("commit")

    def rollback(self) -> None:
        self._finish("rollback")


class _InlineDBAPI(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> InlineAdapted:
        creator_fn = kw.pop("async_creator_fn")
        return InlineAdapted(self, await_(creator_fn(*arg, **kw)))


dbapi = _InlineDBAPI(__import__("aiosqlite"), sqlite3)
"""The engine's ``module`` with :func:`async_creator`: connections adapted inline."""


def connect_args(url: str) -> tuple[list[Any], dict[str, Any]]:
    """``sqlite3.connect``'s arguments for ``url`` (``sqlite+aiosqlite://…``), as
    SQLAlchemy's dialect reads them (the file, ``uri``, …)."""
    args, kwargs = SQLiteDialect_aiosqlite().create_connect_args(make_url(url))
    return list(args), dict(kwargs)


def async_creator(url: str, *, busy_timeout_ms: int) -> Callable[[], Awaitable[InlineConnection]]:
    """SQLAlchemy ``async_creator`` opening ``url`` (``sqlite+aiosqlite://…``) inline."""
    args, kwargs = connect_args(url)
    kwargs["check_same_thread"] = False  # the pool may close it from another thread at exit
    kwargs["timeout"] = 0  # busy waits are async sleeps (_call), never blocking ones
    busy_timeout_s = busy_timeout_ms / 1000

    async def create() -> InlineConnection:
        connection = sqlite3.connect(*args, **kwargs)
        return InlineConnection(connection, busy_timeout_s)

    return create
