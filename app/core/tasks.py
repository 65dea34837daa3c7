"""Fire-and-forget work kept referenced until it finishes (the state's ``background`` set)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine

__all__ = ["Tasks", "spawn"]

# The running background tasks of the process (``AppState.background``).
Tasks = set[asyncio.Task[None]]


def spawn(tasks: Tasks, work: Coroutine[object, object, None]) -> None:
    """Run ``work`` in the background; ``tasks`` holds it until it is done (shutdown waits)."""
    task = asyncio.get_running_loop().create_task(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
