"""Per-key limits: requests per minute (sliding window) and a budget in USD.

rpm: a 60 s sliding window (app.keys.window), in-process, or in Redis when
CONTEXTGATE_REDIS_URL is set, so that workers and replicas share it. It is counted once per
request on every authenticated endpoint (the caller dependency, app.keys.auth). Over the limit
-> 429 with Retry-After.

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
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.core.errors import RateLimited
from app.keys.caller import Caller
from app.keys.window import SlidingWindow

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["KeyLimits", "Reservation"]

WINDOW_S = 60.0
Spend = Callable[[Caller], Awaitable[tuple[float, float]]]


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
        self, spend: Spend, *, redis: Redis | None = None, budget_wait_s: float = 30.0
    ) -> None:
        self._spend = spend
        self._budget_wait_s = budget_wait_s
        self._rpm = SlidingWindow("contextgate:rpm", WINDOW_S, redis=redis)
        self._budgets: dict[str, _Budget] = {}

    async def check_rpm(self, caller: Caller) -> None:
        """Count one request of ``caller`` (every authenticated endpoint, once per request);
        429 with Retry-After over its rpm limit."""
        if caller.key_id is None or caller.rpm_limit is None:
            return
        wait = await self._rpm.hit(caller.key_id, caller.rpm_limit)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise RateLimited(
                f"Rate limit reached for this key: {caller.rpm_limit} requests per minute. "
                f"Try again in {seconds} s.",
                headers={"Retry-After": str(seconds)},
            )

    async def admit(self, caller: Caller) -> Reservation:
        """Reserve budget for one turn (rpm was counted when the caller was authenticated);
        the returned reservation must be released when done."""
        if caller.key_id is None or caller.max_budget is None:
            return Reservation()
        await self._reserve(caller)
        return Reservation(self, caller.key_id)

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
