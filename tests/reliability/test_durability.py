"""SQLite as a server database: WAL, a busy timeout, and write transactions that take the
lock up front (BEGIN IMMEDIATE), so concurrent read-then-write transactions wait, not fail."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import OperationalError

from app.core.database import create_database
from app.db.models import RequestLog, new_id


def _log(n: int) -> RequestLog:
    return RequestLog(
        id=new_id("req"), tenant_id="t", model="m", status="ok", stream=False, latency_ms=n
    )


async def test_wal_and_busy_timeout(sqlite_url: str) -> None:
    database = create_database(sqlite_url, busy_timeout_ms=12_345)
    try:
        async with database.reading() as session:
            mode = (await session.execute(text("PRAGMA journal_mode"))).scalar_one()
            timeout = (await session.execute(text("PRAGMA busy_timeout"))).scalar_one()
        assert mode == "wal"
        assert timeout == 12_345
    finally:
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
        assert all(isinstance(f, OperationalError) for f in failures)
        assert all("locked" in str(f) for f in failures)
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
