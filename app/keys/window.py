"""A sliding-window counter: in-process, or in Redis (one sorted set per key) so that every
worker and replica shares it. Used for rpm per key and for failed-auth attempts per address."""

from __future__ import annotations

import secrets
import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["SlidingWindow"]

# KEYS[1]; ARGV: now, window, limit, member, add (1: count this hit if under the limit).
# Returns {allowed, seconds until a slot frees}.
_REDIS_WINDOW = """
local key, now, window, limit, member, add = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]),
    tonumber(ARGV[3]), ARGV[4], ARGV[5]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
if count >= limit then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return {0, tostring(tonumber(oldest[2]) + window - now)}
end
if add == '1' then
    redis.call('ZADD', key, now, member)
    redis.call('PEXPIRE', key, math.ceil(window * 1000))
end
return {1, '0'}
"""

_MAX_LOCAL_KEYS = 100_000


class SlidingWindow:
    def __init__(self, prefix: str, window_s: float, *, redis: Redis | None = None) -> None:
        self._prefix, self._window_s, self._redis = prefix, window_s, redis
        self._local: dict[str, deque[float]] = {}

    async def hit(self, key: str, limit: int) -> float | None:
        """Count one event if fewer than ``limit`` are in the window; else the seconds until
        one leaves it (the event is not counted)."""
        return await self._run(key, limit, add=True)

    async def peek(self, key: str, limit: int) -> float | None:
        """Like ``hit`` without counting: None while under ``limit``."""
        return await self._run(key, limit, add=False)

    async def _run(self, key: str, limit: int, *, add: bool) -> float | None:
        if self._redis is not None:
            member = f"{time.time():.6f}-{secrets.token_hex(4)}"
            allowed, wait = await self._redis.eval(
                _REDIS_WINDOW,
                1,
                f"{self._prefix}:{key}",
                time.time(),
                self._window_s,
                limit,
                member,
                "1" if add else "0",
            )
            return None if int(allowed) == 1 else float(wait)
        return self._local_run(key, limit, add=add)

    def _local_run(self, key: str, limit: int, *, add: bool) -> float | None:
        now = time.monotonic()
        window = self._local.get(key)
        if window is None:
            if not add:
                return None
            if len(self._local) >= _MAX_LOCAL_KEYS:
                self._forget_idle(now)
            window = self._local[key] = deque()
        while window and window[0] <= now - self._window_s:
            window.popleft()
        if len(window) >= limit:
            return window[0] + self._window_s - now
        if add:
            window.append(now)
        return None

    def _forget_idle(self, now: float) -> None:
        """Bound the memory a flood of distinct keys (addresses) can take."""
        for key in [k for k, w in self._local.items() if not w or w[-1] <= now - self._window_s]:
            del self._local[key]
        while len(self._local) >= _MAX_LOCAL_KEYS:
            del self._local[next(iter(self._local))]
