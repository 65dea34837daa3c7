"""The memory domain's long-lived parts: compaction locks and the retrieval index cache."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from app.core.database import Database
from app.core.settings import Settings
from app.memories.locks import ConversationLocks
from app.memories.recall import VectorCache
from app.memories.vector_backlog import VectorBacklog

logger = logging.getLogger(__name__)

__all__ = ["MemoryRuntime"]

_INDEX_CACHE_SIZE = 64


class MemoryRuntime:
    def __init__(self, settings: Settings, database: Database, redis: Any | None = None) -> None:
        # ``redis``: the state's shared client (its owner closes it).
        self.locks = ConversationLocks(
            redis=redis,
            engine=database.engine,
            use_advisory=settings.database_url.startswith("postgresql"),
        )
        # (tenant, user) -> (signature, index); a signature check per request keeps it honest.
        self._indexes: OrderedDict[tuple[str, str], tuple[Any, Any]] = OrderedDict()
        # One refresh of a user's index at a time (it is updated in place).
        self._index_locks: dict[tuple[str, str], asyncio.Lock] = {}
        # Conversations' message vectors for message recall, loaded incrementally.
        self.recall_vectors = VectorCache()
        # Message vectors embedded after the turn, one job per conversation, at a bounded rate.
        self.vector_backlog = VectorBacklog()

    def cached_index(self, key: tuple[str, str], signature: Any) -> Any | None:
        entry = self._indexes.get(key)
        if entry is None or entry[0] != signature:
            return None
        self._indexes.move_to_end(key)
        return entry[1]

    def cached_entry(self, key: tuple[str, str]) -> tuple[Any, Any] | None:
        """(signature, index) of ``key``, whatever the signature."""
        return self._indexes.get(key)

    def index_lock(self, key: tuple[str, str]) -> asyncio.Lock:
        lock = self._index_locks.get(key)
        if lock is None:
            if len(self._index_locks) > 4 * _INDEX_CACHE_SIZE:  # forget the idle ones
                for old in [k for k, v in self._index_locks.items() if not v.locked()]:
                    del self._index_locks[old]
            lock = self._index_locks[key] = asyncio.Lock()
        return lock

    def store_index(self, key: tuple[str, str], signature: Any, index: Any) -> None:
        self._indexes[key] = (signature, index)
        self._indexes.move_to_end(key)
        while len(self._indexes) > _INDEX_CACHE_SIZE:
            self._indexes.popitem(last=False)
