"""SummaryCache: summaries keyed by tenant, content, focus, summarizer model and prompt version.

Identical concurrent summaries run once: in one process through a shared future, across
replicas (Redis) through a short lock while the others poll for the value. A cache that fails
(Redis unreachable) is a miss with a warning; the request goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.summary_cache.backends import CacheBackend

__all__ = ["SUMMARY_PROMPT_VERSION", "CachedSummary", "SummaryCache", "summary_key"]

logger = logging.getLogger(__name__)

SUMMARY_PROMPT_VERSION = "2"  # 2: focus and source both escaped data blocks
Producer = Callable[[], Awaitable[tuple[str, float]]]  # -> (summary, cost in USD)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def summary_key(tenant_id: str, content: str, focus: str | None, model: str) -> str:
    parts = [tenant_id, _digest(content), _digest(focus or ""), model, SUMMARY_PROMPT_VERSION]
    return "cg:summary:" + _digest("\x1f".join(parts))


@dataclass(slots=True)
class CachedSummary:
    text: str
    hit: bool
    cost: float = 0.0
    note: str | None = None  # set when the cache itself failed


class SummaryCache:
    def __init__(
        self,
        backend: CacheBackend,
        *,
        ttl_s: int = 7 * 24 * 3600,
        lock_ttl_s: float = 60.0,
        poll_s: float = 0.1,
    ) -> None:
        self.backend = backend
        self.ttl_s = ttl_s
        self.lock_ttl_s = lock_ttl_s
        self.poll_s = poll_s
        self._flights: dict[str, asyncio.Future[CachedSummary]] = {}

    async def close(self) -> None:
        await self.backend.close()

    async def get_or_create(self, key: str, produce: Producer) -> CachedSummary:
        flight = self._flights.get(key)
        if flight is not None:
            shared = await asyncio.shield(flight)
            return CachedSummary(shared.text, hit=True, note=shared.note)
        future: asyncio.Future[CachedSummary] = asyncio.get_running_loop().create_future()
        self._flights[key] = future
        try:
            result = await self._resolve(key, produce)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        else:
            future.set_result(result)
            return result
        finally:
            self._flights.pop(key, None)

    async def _resolve(self, key: str, produce: Producer) -> CachedSummary:
        note: str | None = None
        try:
            cached = await self.backend.get(key)
            if cached is not None:
                return CachedSummary(cached, hit=True)
            locked = await self.backend.acquire(key, self.lock_ttl_s)
            if not locked:
                cached = await self._wait_for_other(key)
                if cached is not None:
                    return CachedSummary(cached, hit=True)
        except Exception as exc:
            note = self._failed("read", exc)
            locked = False
        try:
            text, cost = await produce()
        finally:
            if locked:
                await self._quietly_release(key)
        if note is None:
            try:
                await self.backend.set(key, text, self.ttl_s)
            except Exception as exc:
                note = self._failed("write", exc)
        return CachedSummary(text, hit=False, cost=cost, note=note)

    async def _wait_for_other(self, key: str) -> str | None:
        """Another replica summarizes this right now: wait (bounded) for its result."""
        deadline = time.monotonic() + self.lock_ttl_s
        while time.monotonic() < deadline:
            await asyncio.sleep(self.poll_s)
            cached = await self.backend.get(key)
            if cached is not None:
                return cached
        return None

    async def _quietly_release(self, key: str) -> None:
        try:
            await self.backend.release(key)
        except Exception as exc:
            self._failed("unlock", exc)

    def _failed(self, what: str, exc: Exception) -> str:
        logger.warning(
            "summary cache unavailable",
            extra={"operation": what, "backend": self.backend.name, "error": str(exc)[:200]},
        )
        return f"summary cache unavailable ({self.backend.name} {what}: {type(exc).__name__})"
