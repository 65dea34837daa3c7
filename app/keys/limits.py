"""Per-key limits: requests per minute (sliding window) and a budget in USD.

rpm: a 60 s sliding window, in-process, or in Redis (a sorted set per key) when
CONTEXTGATE_REDIS_URL is set, so that replicas share it. Over the limit -> 429 with Retry-After.

Budget: what a key spent is the sum of ``request_logs.total_cost``. Spent >= max_budget -> 429
``insufficient_quota``. So that concurrent requests cannot overspend by more than one request,
each admitted request holds a reservation until it ends; a request is admitted while
``spent + (in_flight + 1) * largest_request_cost <= max_budget`` or when nothing else is in
flight (that one request is the allowed overspend); otherwise it waits for a reservation to be
released. The reservation counter is per process.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app.core.errors import RateLimited
from app.keys.auth import Caller

__all__ = ["KeyLimits", "Reservation"]

WINDOW_S = 60.0
Spend = Callable[[Caller], Awaitable[tuple[float, float]]]

_REDIS_WINDOW = """
local key, now, window, limit, member = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]),
    tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
if count >= limit then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return {0, tostring(tonumber(oldest[2]) + window - now)}
end
redis.call('ZADD', key, now, member)
redis.call('PEXPIRE', key, math.ceil(window * 1000))
return {1, '0'}
"""


@dataclass(slots=True)
class _Budget:
    in_flight: int = 0
    released: asyncio.Condition = field(default_factory=asyncio.Condition)


class Reservation:
    """Held while a request runs; release() exactly once (idempotent)."""

    def __init__(self, limits: KeyLimits | None = None, key_id: str | None = None) -> None:
        self._limits, self._key_id = limits, key_id

    async def release(self) -> None:
        limits, self._limits = self._limits, None
        if limits is not None and self._key_id is not None:
            await limits._release(self._key_id)


class KeyLimits:
    def __init__(
        self, spend: Spend, *, redis: Any | None = None, budget_wait_s: float = 30.0
    ) -> None:
        self._spend = spend
        self._redis = redis
        self._budget_wait_s = budget_wait_s
        self._windows: dict[str, deque[float]] = {}
        self._budgets: dict[str, _Budget] = {}

    async def admit(self, caller: Caller) -> Reservation:
        """Check rpm and budget; the returned reservation must be released when done."""
        if caller.key_id is None:
            return Reservation()
        if caller.rpm_limit is not None:
            await self._check_rpm(caller.key_id, caller.rpm_limit)
        if caller.max_budget is None:
            return Reservation()
        await self._reserve(caller)
        return Reservation(self, caller.key_id)

    # ---- requests per minute ---------------------------------------------------------------
    async def _check_rpm(self, key_id: str, limit: int) -> None:
        if self._redis is not None:
            wait = await self._redis_window(key_id, limit)
        else:
            wait = self._local_window(key_id, limit)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise RateLimited(
                f"Rate limit reached for this key: {limit} requests per minute. "
                f"Try again in {seconds} s.",
                headers={"Retry-After": str(seconds)},
            )

    def _local_window(self, key_id: str, limit: int) -> float | None:
        now = time.monotonic()
        window = self._windows.setdefault(key_id, deque())
        while window and window[0] <= now - WINDOW_S:
            window.popleft()
        if len(window) >= limit:
            return window[0] + WINDOW_S - now
        window.append(now)
        return None

    async def _redis_window(self, key_id: str, limit: int) -> float | None:
        member = f"{time.time():.6f}-{secrets.token_hex(4)}"
        redis: Any = self._redis
        allowed, wait = await redis.eval(
            _REDIS_WINDOW, 1, f"contextgate:rpm:{key_id}", time.time(), WINDOW_S, limit, member
        )
        return None if int(allowed) == 1 else float(wait)

    # ---- budget ----------------------------------------------------------------------------
    async def _reserve(self, caller: Caller) -> None:
        assert caller.key_id is not None
        assert caller.max_budget is not None
        budget = self._budgets.setdefault(caller.key_id, _Budget())
        deadline = time.monotonic() + self._budget_wait_s
        async with budget.released:
            while True:
                spent, largest = await self._spend(caller)
                if spent >= caller.max_budget:
                    raise RateLimited(
                        f"This key has used its budget of ${caller.max_budget:.4f} "
                        f"(spent ${spent:.4f}).",
                        code="insufficient_quota",
                    )
                if budget.in_flight == 0 or (
                    largest > 0 and spent + (budget.in_flight + 1) * largest <= caller.max_budget
                ):
                    budget.in_flight += 1
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RateLimited(
                        "Requests in flight hold the rest of this key's budget; try again soon.",
                        headers={"Retry-After": "1"},
                    )
                try:
                    await asyncio.wait_for(budget.released.wait(), remaining)
                except TimeoutError:
                    continue

    async def _release(self, key_id: str) -> None:
        budget = self._budgets.get(key_id)
        if budget is None:
            return
        async with budget.released:
            budget.in_flight = max(0, budget.in_flight - 1)
            budget.released.notify_all()
