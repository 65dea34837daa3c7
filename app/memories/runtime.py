"""The memory domain's long-lived parts: compaction locks and the retrieval index cache."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from app.core.database import Database
from app.core.settings import Settings
from app.memories.locks import ConversationLocks

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

    def cached_index(self, key: tuple[str, str], signature: Any) -> Any | None:
        entry = self._indexes.get(key)
        if entry is None or entry[0] != signature:
            return None
        self._indexes.move_to_end(key)
        return entry[1]

    def store_index(self, key: tuple[str, str], signature: Any, index: Any) -> None:
        self._indexes[key] = (signature, index)
        self._indexes.move_to_end(key)
        while len(self._indexes) > _INDEX_CACHE_SIZE:
            self._indexes.popitem(last=False)
