"""SQLite transactions without SQLAlchemy's session machinery, for every request's own.

A read or write transaction through an ``AsyncSession`` costs ~70-140 µs of SQLAlchemy before
its first statement and after its last (the session, a pool checkout and check-in with their
events, the connection's transaction objects, greenlet trips), against ~2 µs for SQLite's own
BEGIN and COMMIT; a chat turn runs two (bench/README.md, "Speed and scale"). A *lane* is a
connection taken out of the engine's pool once and kept: a transaction on it is SQLite's
BEGIN and COMMIT on its ``sqlite3`` connection, and its statements run there directly
(app/db/sqlite_core.py). The session handed out is bound to the lane's connection, so
anything that needs the ORM still works: on first use it joins the transaction already open
on the connection (the engine's BEGIN listener sees it and emits nothing), and it commits or
rolls back that same transaction at the end.

The lanes are at most the pool's size; past them, or for an in-memory database (one shared
connection), transactions take the usual session path (app/core/database.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from app.core.errors import DatabaseUnavailable
from app.core.sqlite_driver import InlineConnection, is_busy

__all__ = ["LANE", "Lane", "Lanes", "lane_of"]

LANE = "contextgate.lane"
"""The key of a lane session's ``info``: the lane it runs on."""


@dataclass(frozen=True, slots=True)
class Lane:
    connection: AsyncConnection  # out of the engine's pool for the process's life
    sync_connection: Connection
    driver: InlineConnection
    # Bound to the connection and handed out again: a transaction that used it closes it
    # (which empties it), one that did not leaves it as it was.
    session: AsyncSession


def lane_of(session: AsyncSession) -> Lane | None:
    lane: Lane | None = session.sync_session.info.get(LANE)
    return lane


class Lanes:
    """The process's lanes: taken from the engine as needed, up to ``limit``."""

    def __init__(self, engine: AsyncEngine, limit: int) -> None:
        self._engine = engine
        self._limit = limit
        self._free: list[Lane] = []
        self._opened = 0
        self._closed = False

    @property
    def opened(self) -> int:
        """Connections these lanes hold out of the engine's pool."""
        return self._opened

    @property
    def in_use(self) -> int:
        """Lanes inside a transaction now."""
        return self._opened - len(self._free)

    async def _take(self) -> Lane | None:
        if self._free:
            return self._free.pop()
        if self._opened >= self._limit or self._closed:
            return None
        self._opened += 1
        try:
            connection = await self._engine.connect()
        except BaseException:
            self._opened -= 1
            raise
        sync_connection = connection.sync_connection
        assert sync_connection is not None
        driver = sync_connection.connection.driver_connection
        assert isinstance(driver, InlineConnection)
        session = AsyncSession(bind=connection, expire_on_commit=False)
        lane = Lane(connection, sync_connection, driver, session)
        session.sync_session.info[LANE] = lane
        return lane

    async def _give_back(self, lane: Lane) -> None:
        healthy = not (lane.connection.closed or lane.connection.invalidated)
        if healthy and not self._closed and not lane.driver._conn.in_transaction:
            self._free.append(lane)
            return
        self._opened -= 1
        await lane.connection.close()

    @asynccontextmanager
    async def transaction(
        self, *, immediate: bool, commit: bool
    ) -> AsyncIterator[AsyncSession | None]:
        """A session on a lane inside SQLite's own transaction (BEGIN IMMEDIATE for a
        writer), committed (``commit``) or rolled back at the end; None: no lane free."""
        lane = await self._take()
        if lane is None:
            yield None
            return
        try:
            await _run(lane.driver, "BEGIN IMMEDIATE" if immediate else "BEGIN")
            session = lane.session
            try:
                yield session
            except BaseException:
                await _end(session, lane, commit=commit, failed=True)
                raise
            await _end(session, lane, commit=commit, failed=False)
        finally:
            await self._give_back(lane)

    async def close(self) -> None:
        self._closed = True
        free, self._free = self._free, []
        self._opened -= len(free)
        for lane in free:
            await lane.connection.close()


async def _end(session: AsyncSession, lane: Lane, *, commit: bool, failed: bool) -> None:
    """End the lane's transaction as the usual session path does: through the session when
    the ORM joined it (a reader's is closed, which rolls back without expiring what it
    loaded), else with SQLite's own COMMIT or ROLLBACK; a failed COMMIT rolls back."""
    try:
        keep = commit and not failed
        if session.sync_session.in_transaction():
            if keep:
                await session.commit()
            elif commit:  # a writer's failure, as the session path rolls it back
                await session.rollback()
            await session.close()
        if lane.driver._conn.in_transaction:
            await _run(lane.driver, "COMMIT" if keep else "ROLLBACK")
    except BaseException:
        if lane.driver._conn.in_transaction:
            lane.driver._conn.rollback()
        raise


async def _run(driver: InlineConnection, sql: str) -> None:
    """One statement of SQLite's own, waiting (asynchronously) while the database is busy;
    still busy after the busy timeout: ``DatabaseUnavailable`` (503), as through the engine."""
    try:
        await driver._call(driver._conn.execute, sql)
    except sqlite3.OperationalError as error:
        if is_busy(error):
            raise DatabaseUnavailable() from error
        raise
