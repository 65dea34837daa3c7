"""SQLite's WAL checkpoints on a thread of their own, off the event loop.

In WAL mode SQLite copies the log back into the database file once it passes 1,000 pages,
and by default the connection whose COMMIT crossed that line does it, fsyncs included. The
server's connections run on the event loop's thread (app/core/sqlite_driver.py), so one
commit in a hundred took 1-18 ms and stalled every request meanwhile: measured on the
benchmark's turns, commits over 1 ms were 1 % of them and 69 % of all commit time (median
54 µs, p99 6 ms; bench/README.md, "Speed and scale"). The server's connections therefore
turn automatic checkpoints off, and this thread runs the PASSIVE checkpoint SQLite would (it
never waits for readers or writers) every half second in which the log was written to. The
log stays as small as SQLite's own rule keeps it under the load measured (~1,000 pages a
third of a second), and sqlite3 releases the GIL while SQLite works, so the loop keeps serving.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable

__all__ = ["WalCheckpointer"]

logger = logging.getLogger(__name__)

INTERVAL_S = 0.5


class WalCheckpointer:
    """A daemon thread checkpointing one SQLite file's log each ``INTERVAL_S`` it changed."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], path: str) -> None:
        self._connect = connect
        self._wal_path = f"{path}-wal"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.checkpoints = 0  # completed by this thread (tests, diagnostics)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="sqlite-wal-checkpoint", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        try:
            connection = self._connect()
        except sqlite3.Error as error:
            logger.warning(
                "WAL checkpointer could not open the database", extra={"error": str(error)}
            )
            return
        last: int | None = None
        try:
            while not self._stop.wait(INTERVAL_S):
                written = self._wal_mtime()
                if written is not None and written != last:
                    self.checkpoint(connection)
                    last = written
        finally:
            connection.close()

    def _wal_mtime(self) -> int | None:
        try:
            return os.stat(self._wal_path).st_mtime_ns
        except OSError:
            return None

    def checkpoint(self, connection: sqlite3.Connection) -> None:
        """One PASSIVE checkpoint; a busy database (another process checkpointing) is
        left for the next round."""
        try:
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error as error:
            logger.warning("WAL checkpoint failed", extra={"error": str(error)})
