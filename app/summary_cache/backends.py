"""Cache backends: an in-process LRU (entries, bytes, TTL) and Redis (shared by replicas)."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol

__all__ = ["CacheBackend", "InProcessBackend", "RedisBackend"]


class CacheBackend(Protocol):
    """get/set strings with a TTL. Errors propagate; the SummaryCache turns them into misses."""

    name: str

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str, ttl_s: int) -> None: ...

    async def delete(self, key: str) -> None: ...

    async def acquire(self, key: str, ttl_s: float) -> bool:
        """Take a short lock across replicas; True when taken (or no locking is needed)."""
        ...

    async def release(self, key: str) -> None: ...

    async def close(self) -> None: ...


class InProcessBackend:
    """LRU bounded by entry count and by total bytes of the values; entries expire."""

    name = "memory"

    def __init__(self, max_entries: int = 2048, max_bytes: int = 64 << 20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[str, float, int]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    async def get(self, key: str) -> str | None:
        item = self._items.get(key)
        if item is None:
            return None
        value, expires, _ = item
        if expires <= time.monotonic():
            self._remove(key)
            return None
        self._items.move_to_end(key)
        return value

    async def set(self, key: str, value: str, ttl_s: int) -> None:
        size = len(value.encode())
        if size > self.max_bytes:
            return
        self._remove(key)
        self._items[key] = (value, time.monotonic() + ttl_s, size)
        self._bytes += size
        while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
            oldest = next(iter(self._items))
            self._remove(oldest)

    async def delete(self, key: str) -> None:
        self._remove(key)

    async def acquire(self, key: str, ttl_s: float) -> bool:
        return True  # one process: the SummaryCache's in-process single-flight is enough

    async def release(self, key: str) -> None:
        return None

    async def close(self) -> None:
        self._items.clear()
        self._bytes = 0

    def _remove(self, key: str) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self._bytes -= item[2]


class RedisBackend:
    name = "redis"

    def __init__(self, url: str, *, timeout_s: float = 2.0) -> None:
        import redis.asyncio as aioredis  # only with a Redis configured: ~0.1 s of start-up

        self._redis = aioredis.from_url(
            url,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
        )

    async def get(self, key: str) -> str | None:
        value = await self._redis.get(key)
        return None if value is None else str(value)

    async def set(self, key: str, value: str, ttl_s: int) -> None:
        await self._redis.set(key, value, ex=max(1, ttl_s))

    async def delete(self, key: str) -> None:
        await self._redis.delete(key)

    async def acquire(self, key: str, ttl_s: float) -> bool:
        taken = await self._redis.set(f"{key}:lock", "1", nx=True, px=max(1, int(ttl_s * 1000)))
        return bool(taken)

    async def release(self, key: str) -> None:
        await self._redis.delete(f"{key}:lock")

    async def close(self) -> None:
        await self._redis.aclose()
