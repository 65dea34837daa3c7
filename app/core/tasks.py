"""Fire-and-forget work kept referenced until it finishes (the state's ``background`` set),
and the short bookkeeping a request does once its answer is on its way (``after_answer``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine

__all__ = ["Tasks", "after_answer", "spawn"]

logger = logging.getLogger(__name__)

# The running background tasks of the process (``AppState.background``).
Tasks = set[asyncio.Task[None]]


def spawn(tasks: Tasks, work: Coroutine[object, object, None]) -> None:
    """Run ``work`` in the background; ``tasks`` holds it until it is done (shutdown waits)."""
    task = asyncio.get_running_loop().create_task(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def after_answer(tasks: Tasks, work: Callable[[], object]) -> None:
    """Run ``work`` on the event loop's next turn, as a task of ``tasks`` (shutdown and the
    tests wait for it as for any background work). The request that asks does not yield
    again before its response is written, so ``work`` runs while the answer travels to the
    client and the client reads it (metrics, scheduling the background work), not before
    it. A failure is logged, never raised: the answer is gone."""
    spawn(tasks, _later(work))


async def _later(work: Callable[[], object]) -> None:
    try:
        work()
    except Exception:
        logger.exception("after-answer work failed")
