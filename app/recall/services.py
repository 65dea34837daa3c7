"""What message recall runs on: the database, the embedder, the vectors this process has read,
the backlog of vectors to compute, and the background tasks that compute and store them."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from app.core.database import Database
from app.core.tasks import Tasks
from app.embedders.embedder import Embedder
from app.recall.vector_sets import VectorCache

__all__ = ["SETTLED_REMEMBERED", "RecallServices", "VectorBacklog"]

SETTLED_REMEMBERED = 10_000  # conversations whose settled state a process remembers


class VectorBacklog:
    """Which conversations have a vector job running, and the process's one embedding slot."""

    def __init__(self) -> None:
        self._again: dict[tuple[str, str], str | None] = {}  # running job -> its latest user
        self._rerun: set[tuple[str, str]] = set()
        self.slot = asyncio.Lock()
        self._behind: set[tuple[str, str]] = set()  # a job found more than one batch
        # conversation -> the cleared sequence at which its last job left nothing to embed
        self._settled: OrderedDict[tuple[str, str], int] = OrderedDict()
        self.batches = 0  # batches embedded so far (benchmarks read it)

    def running(self, tenant_id: str, conversation_id: str) -> bool:
        return (tenant_id, conversation_id) in self._again

    def behind(self, tenant_id: str, conversation_id: str) -> bool:
        """Whether this process is embedding a backlog of the conversation (recall says so)."""
        return (tenant_id, conversation_id) in self._behind

    def mark(self, key: tuple[str, str], behind: bool) -> None:
        if behind:
            self._behind.add(key)
        else:
            self._behind.discard(key)

    def settle(self, key: tuple[str, str], cleared_sequence: int) -> None:
        """A job of ``key`` left nothing to embed, its tool results cleared below
        ``cleared_sequence``: a turn that brings no text need not start another."""
        self._settled[key] = cleared_sequence
        self._settled.move_to_end(key)
        while len(self._settled) > SETTLED_REMEMBERED:
            self._settled.popitem(last=False)

    def settled(self, key: tuple[str, str]) -> int | None:
        return self._settled.get(key)

    def start(self, key: tuple[str, str], user: str | None) -> bool:
        """True: start a job for ``key``; False: one runs and will go round once more."""
        self._settled.pop(key, None)
        if key in self._again:
            self._again[key] = user or self._again[key]
            self._rerun.add(key)
            return False
        self._again[key] = user
        return True

    def drop(self, key: tuple[str, str]) -> None:
        self._behind.discard(key)
        self._rerun.discard(key)
        self._again.pop(key, None)

    def finish(self, key: tuple[str, str]) -> tuple[bool, str | None]:
        """(go round once more, with this user) when a turn asked while the job ran."""
        if key in self._rerun:
            self._rerun.discard(key)
            return True, self._again.get(key)
        self._again.pop(key, None)
        return False, None


@dataclass(frozen=True, slots=True)
class RecallServices:
    database: Database
    embedder: Embedder | None
    cache: VectorCache
    backlog: VectorBacklog
    tasks: Tasks
