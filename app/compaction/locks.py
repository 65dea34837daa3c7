"""One compaction per conversation at a time: in this process, and across replicas.

Always an asyncio lock per conversation (cheap, no round trip for the common case); then, with
``CONTEXTGATE_REDIS_URL``, a Redis lock (``redis.asyncio`` Lock, with a TTL so a dead replica
cannot hold it forever); else on PostgreSQL a transaction-scoped advisory lock
(``pg_try_advisory_xact_lock``) held on its own connection. SQLite serves one machine, so the
process lock (plus the boundary check at write time) is enough there.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["ConversationLocks", "advisory_key"]

_POLL_S = 0.05


def advisory_key(conversation_id: str) -> int:
    """A stable signed 64-bit key for PostgreSQL's advisory locks."""
    digest = hashlib.blake2b(f"compaction:{conversation_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ConversationLocks:
    def __init__(
        self,
        *,
        redis: Redis | None = None,
        engine: AsyncEngine | None = None,
        use_advisory: bool = False,
        ttl_s: float = 300.0,
    ) -> None:
        self._local: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._redis = redis
        self._engine = engine
        self._use_advisory = use_advisory and engine is not None and redis is None
        self._ttl_s = ttl_s

    @property
    def backend(self) -> str:
        if self._redis is not None:
            return "redis"
        return "postgres" if self._use_advisory else "process"

    def _local_lock(self, conversation_id: str) -> asyncio.Lock:
        lock = self._local.get(conversation_id)
        if lock is None:
            lock = asyncio.Lock()
            self._local[conversation_id] = lock
        return lock

    @asynccontextmanager
    async def hold(self, conversation_id: str, *, timeout_s: float | None) -> AsyncIterator[bool]:
        """Yield True while holding the lock; False when it could not be had.

        ``timeout_s=None`` only tries (a background compaction skips a busy conversation);
        otherwise it waits up to ``timeout_s``.
        """
        lock = self._local_lock(conversation_id)
        deadline = time.monotonic() + (timeout_s or 0.0)
        if timeout_s is None:
            if lock.locked():
                yield False
                return
            await lock.acquire()
        else:
            try:
                await asyncio.wait_for(lock.acquire(), timeout=max(0.0, timeout_s))
            except TimeoutError:
                yield False
                return
        try:
            async with self._distributed(conversation_id, deadline, timeout_s is None) as held:
                yield held
        finally:
            lock.release()

    @asynccontextmanager
    async def _distributed(
        self, conversation_id: str, deadline: float, try_once: bool
    ) -> AsyncIterator[bool]:
        if self._redis is not None:
            async with self._redis_lock(conversation_id, deadline, try_once) as held:
                yield held
        elif self._use_advisory:
            async with self._advisory_lock(conversation_id, deadline, try_once) as held:
                yield held
        else:
            yield True

    @asynccontextmanager
    async def _redis_lock(
        self, conversation_id: str, deadline: float, try_once: bool
    ) -> AsyncIterator[bool]:
        from redis.exceptions import LockError

        assert self._redis is not None
        lock = self._redis.lock(
            f"contextgate:compaction:{conversation_id}",
            timeout=self._ttl_s,
            sleep=_POLL_S,
            blocking=not try_once,
            blocking_timeout=max(0.0, deadline - time.monotonic()),
        )
        held = bool(await lock.acquire())
        try:
            yield held
        finally:
            if held:
                try:
                    await lock.release()
                except LockError:  # expired meanwhile (TTL): someone else may hold it now
                    pass

    @asynccontextmanager
    async def _advisory_lock(
        self, conversation_id: str, deadline: float, try_once: bool
    ) -> AsyncIterator[bool]:
        assert self._engine is not None
        key = advisory_key(conversation_id)
        async with self._engine.connect() as connection:
            async with connection.begin():
                query = text("SELECT pg_try_advisory_xact_lock(:key)")
                held = bool(await connection.scalar(query, {"key": key}))
                while not held and not try_once and time.monotonic() < deadline:
                    await asyncio.sleep(_POLL_S)
                    held = bool(await connection.scalar(query, {"key": key}))
                # The lock lives as long as this transaction; it ends (and frees it) on exit.
                yield held
