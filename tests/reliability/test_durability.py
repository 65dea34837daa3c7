"""SQLite as a server database: WAL, a busy timeout waited out with async sleeps (the driver
runs SQLite on the event loop's thread), and write transactions that take the lock up front
(BEGIN IMMEDIATE), so concurrent read-then-write transactions wait, not fail."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest
from sqlalchemy import func, select, text

from app.core.database import create_database
from app.core.errors import DatabaseUnavailable
from app.db.models import RequestLog, new_id


def _log(n: int) -> RequestLog:
    return RequestLog(
        id=new_id("req"), tenant_id="t", model="m", status="ok", stream=False, latency_ms=n
    )


async def test_wal_and_no_blocking_busy_handler(sqlite_url: str) -> None:
    database = create_database(sqlite_url, busy_timeout_ms=12_345)
    try:
        async with database.reading() as session:
            mode = (await session.execute(text("PRAGMA journal_mode"))).scalar_one()
            timeout = (await session.execute(text("PRAGMA busy_timeout"))).scalar_one()
        assert mode == "wal"
        assert timeout == 0  # busy waits are the driver's async sleeps, never SQLite's
    finally:
        await database.dispose()


def _sqlite_path(url: str) -> str:
    return url.split("///", 1)[1]


async def _ticks_while(task: asyncio.Task[None], seconds: float) -> int:
    """How often the event loop ran a 10 ms timer while ``task`` was waiting."""
    ticks = 0
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline and not task.done():
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks


async def _write_one(database: object, n: int) -> None:
    async with database.writing() as session:  # type: ignore[attr-defined]
        session.add(_log(n))


async def test_a_writer_behind_another_process_lock_waits_without_blocking_the_loop(
    sqlite_url: str,
) -> None:
    database = create_database(sqlite_url, busy_timeout_ms=5_000)
    other = sqlite3.connect(_sqlite_path(sqlite_url), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        writer = asyncio.create_task(_write_one(database, 1))
        ticks = await _ticks_while(writer, 0.3)
        assert not writer.done()  # still waiting for the lock ...
        assert ticks >= 15  # ... while the loop kept running (a blocking wait gives ~0)
        other.execute("COMMIT")
        await asyncio.wait_for(writer, 5)
        async with database.reading() as session:
            count = (await session.execute(select(func.count()).select_from(RequestLog))).scalar()
        assert count == 1
    finally:
        other.close()
        await database.dispose()


async def test_a_writer_gives_up_after_the_busy_timeout(sqlite_url: str) -> None:
    database = create_database(sqlite_url, busy_timeout_ms=200)
    other = sqlite3.connect(_sqlite_path(sqlite_url), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        # a 503 database_unavailable (Retry-After) for the client, the driver's error as cause
        with pytest.raises(DatabaseUnavailable) as raised:
            await _write_one(database, 1)
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        assert "locked" in str(raised.value.__cause__)
        assert 0.2 <= time.monotonic() - started < 3
        other.execute("ROLLBACK")
        await _write_one(database, 2)  # the connection is usable again
    finally:
        other.close()
        await database.dispose()


async def _read_then_write(database: object, n: int, *, immediate: bool) -> None:
    db = database  # a Database
    if immediate:
        context = db.writing()  # type: ignore[attr-defined]
    else:
        context = db.sessionmaker.begin()  # type: ignore[attr-defined]
    async with context as session:
        await session.execute(select(func.count()).select_from(RequestLog))
        await asyncio.sleep(0.01)  # others read meanwhile
        session.add(_log(n))
        await session.flush()


async def test_concurrent_read_then_write_transactions_all_commit(sqlite_url: str) -> None:
    database = create_database(sqlite_url, pool_size=8)
    try:
        await asyncio.gather(*[_read_then_write(database, n, immediate=True) for n in range(40)])
        async with database.reading() as session:
            count = (
                await session.execute(select(func.count()).select_from(RequestLog))
            ).scalar_one()
        assert count == 40
    finally:
        await database.dispose()


async def test_deferred_transactions_would_fail_at_once(sqlite_url: str) -> None:
    """The contrast that motivates BEGIN IMMEDIATE: a deferred read-then-write loses the race
    with "database is locked" right away, whatever the busy timeout."""
    database = create_database(sqlite_url, pool_size=8)
    try:
        results = await asyncio.gather(
            *[_read_then_write(database, n, immediate=False) for n in range(8)],
            return_exceptions=True,
        )
        failures = [r for r in results if isinstance(r, Exception)]
        assert failures, "expected at least one deferred transaction to fail"
        assert all(isinstance(f, DatabaseUnavailable) for f in failures)
        assert all("locked" in str(f.__cause__) for f in failures)
    finally:
        await database.dispose()


@pytest.mark.parametrize("pragma", ["foreign_keys"])
async def test_foreign_keys_on(sqlite_url: str, pragma: str) -> None:
    database = create_database(sqlite_url)
    try:
        async with database.reading() as session:
            assert (await session.execute(text(f"PRAGMA {pragma}"))).scalar_one() == 1
    finally:
        await database.dispose()


@pytest.mark.parametrize("failure", ["cancelled", "error"])
async def test_a_read_or_write_that_ends_badly_gives_its_connection_back(
    sqlite_url: str, failure: str
) -> None:
    """A transaction cancelled or failed halfway returns its connection to the pool and
    releases the write lock, and the next one works."""
    database = create_database(sqlite_url)
    pool = database.engine.sync_engine.pool
    lanes = database.lanes
    inside = asyncio.Event()

    def in_use() -> int:
        """Connections inside a transaction: from the pool, or on a lane (a lane holds its
        connection out of the pool between transactions, app/core/sqlite_lanes.py)."""
        checked_out: int = pool.checkedout()  # type: ignore[attr-defined]
        return checked_out - lanes.opened + lanes.in_use if lanes else checked_out

    async def hold(writing: bool) -> None:
        transaction = database.writing() if writing else database.reading()
        async with transaction as session:
            await session.execute(text("SELECT 1"))
            inside.set()
            if failure == "error":
                raise RuntimeError("boom")
            await asyncio.sleep(10)

    try:
        for writing in (False, True):
            inside.clear()
            task = asyncio.create_task(hold(writing))
            await inside.wait()
            if failure == "cancelled":
                assert in_use() == 1
                task.cancel()
            with pytest.raises((asyncio.CancelledError, RuntimeError)):
                await task
            assert in_use() == 0
            assert not database.write_lock.locked()
        async with database.writing() as session:
            session.add(_log(1))
        async with database.reading() as session:
            assert (await session.execute(select(func.count(RequestLog.id)))).scalar_one() == 1
    finally:
        await database.dispose()
