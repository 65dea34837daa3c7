"""Which conversation ends the turns of this process are continuing.

A Responses request with ``previous_response_id`` continues its conversation exactly where that
response ended. When two such requests continue the same end at once, the second must branch
(it may not see the first one's turn). The write that stores a turn decides it atomically on
every backend and across replicas (``ConversationService.append`` with ``at``), but only when
the turn is stored; claiming the end when a turn starts lets the second request of a process
branch at once, so that what it tells its client first (the ``X-Conversation-Id`` header, the
``response.created`` event) is already true.
"""

from __future__ import annotations

import time

__all__ = ["HeadClaims"]

Head = tuple[str, int]  # (conversation id, stored length the turn continues from)


class HeadClaims:
    """Claims on conversation ends, per process. A claim not released (a stream never read)
    lapses after ``ttl_s``, the longest a turn may take."""

    def __init__(self, ttl_s: float) -> None:
        self._ttl_s = ttl_s
        self._held: dict[Head, float] = {}

    def claim(self, head: Head) -> bool:
        """Claim ``head``; False when a live claim holds it already."""
        now = time.monotonic()
        if len(self._held) > 1024:  # claims lost to streams nobody read: forget the lapsed
            self._held = {h: until for h, until in self._held.items() if until > now}
        if self._held.get(head, 0.0) > now:
            return False
        self._held[head] = now + self._ttl_s
        return True

    def release(self, head: Head) -> None:
        self._held.pop(head, None)
