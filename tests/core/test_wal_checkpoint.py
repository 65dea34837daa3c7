"""The server's SQLite log is checkpointed by a thread of its own, never by a request's
COMMIT on the event loop (app/core/wal_checkpoint.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from sqlalchemy import text

from app.core.database import create_database

ROW = "x" * 4000
ROWS = 1500  # ~6 MB: past SQLite's 1,000-page automatic checkpoint


async def _write_rows(url: str, *, background: bool) -> tuple[int, int, int]:
    """(the main file's size right after a big COMMIT, a second later, the connections'
    ``wal_autocheckpoint``)."""
    database = create_database(url, background_checkpoints=background)
    path = Path(url.split("///", 1)[1])
    try:
        async with database.writing() as session:
            await session.execute(text("CREATE TABLE IF NOT EXISTS big (v TEXT)"))
            for _ in range(ROWS):
                await session.execute(text("INSERT INTO big VALUES (:v)"), {"v": ROW})
        after_commit = os.path.getsize(path)
        checkpointer = database.checkpointer
        for _ in range(100):  # up to 10 s for the checkpointer's next round
            if checkpointer is None or checkpointer.checkpoints:
                break
            await asyncio.sleep(0.1)
        later = os.path.getsize(path)
        async with database.reading() as session:
            setting = (await session.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one()
        return after_commit, later, setting
    finally:
        await database.dispose()
        if database.checkpointer is not None:
            assert database.checkpointer._thread is None  # stopped with the database


async def test_the_commit_leaves_the_checkpoint_to_the_thread(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'server.db'}"
    after_commit, later, setting = await _write_rows(url, background=True)
    assert setting == 0
    assert after_commit < 1_000_000  # the rows are only in the log after the COMMIT
    assert later > ROWS * len(ROW)  # and in the database file once the thread ran


async def test_without_the_thread_sqlite_checkpoints_on_commit(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    after_commit, _, setting = await _write_rows(url, background=False)
    assert setting == 1000  # SQLite's default: the CLI's connections keep it
    assert after_commit > ROWS * len(ROW) // 2
