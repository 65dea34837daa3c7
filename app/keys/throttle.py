"""Failed-auth throttling per client address, for /v1 and /ui/login.

Failures are counted in a sliding window (in Redis when configured, so workers and replicas
share the count). Once an address has ``max_failures`` failures in the window, its next
failure blocks it until the oldest one leaves the window: every request from it then answers
429 with ``Retry-After``, before any key is checked (so a blocked address cannot keep guessing).
The block itself is remembered per process, so a request with a good key costs no Redis round
trip; another worker learns of it at the address's next failure there.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from app.core.errors import RateLimited
from app.keys.window import SlidingWindow

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["AuthThrottle", "TooManyAuthFailures"]

_MAX_BLOCKED = 100_000


class TooManyAuthFailures(RateLimited):
    default_code = "too_many_auth_failures"


class AuthThrottle:
    def __init__(self, max_failures: int, window_s: float, *, redis: Redis | None = None) -> None:
        self._max_failures = max_failures
        self._window = SlidingWindow("contextgate:authfail", window_s, redis=redis)
        self._blocked_until: dict[str, float] = {}

    def check(self, address: str | None) -> None:
        """429 while ``address`` is blocked."""
        if not address or self._max_failures <= 0:
            return
        until = self._blocked_until.get(address)
        if until is None:
            return
        remaining = until - time.monotonic()
        if remaining <= 0:
            del self._blocked_until[address]
            return
        raise _blocked(remaining)

    async def failed(self, address: str | None) -> None:
        """Count a failed attempt; 429 (instead of the caller's 401) once over the limit."""
        if not address or self._max_failures <= 0:
            return
        wait = await self._window.hit(address, self._max_failures)
        if wait is None:
            return
        if len(self._blocked_until) >= _MAX_BLOCKED:
            now = time.monotonic()
            self._blocked_until = {a: t for a, t in self._blocked_until.items() if t > now}
        self._blocked_until[address] = time.monotonic() + wait
        raise _blocked(wait)


def _blocked(wait: float) -> TooManyAuthFailures:
    seconds = max(1, math.ceil(wait))
    return TooManyAuthFailures(
        f"Too many failed authentication attempts from this address. Try again in {seconds} s.",
        headers={"Retry-After": str(seconds)},
    )
