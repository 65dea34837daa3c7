"""Users' retrieval indexes cached per process, and one refresh of an index at a time."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.memories.memory_index import UserIndex

__all__ = ["INDEX_CACHE_SIZE", "MemoryIndexes"]

INDEX_CACHE_SIZE = 64

IndexSignature = tuple[int, datetime | None, str | None]
"""The user's active memories (count, latest update) and the embedder's name."""


class MemoryIndexes:
    """(tenant, user) -> (signature, index); a signature check per request keeps it honest
    (index_refresh.py)."""

    def __init__(self) -> None:
        self._indexes: OrderedDict[tuple[str, str], tuple[IndexSignature, UserIndex]] = (
            OrderedDict()
        )
        # One refresh of a user's index at a time (it is updated in place).
        self._index_locks: dict[tuple[str, str], asyncio.Lock] = {}

    def cached_index(self, key: tuple[str, str], signature: IndexSignature) -> UserIndex | None:
        entry = self._indexes.get(key)
        if entry is None or entry[0] != signature:
            return None
        self._indexes.move_to_end(key)
        return entry[1]

    def cached_entry(self, key: tuple[str, str]) -> tuple[IndexSignature, UserIndex] | None:
        """(signature, index) of ``key``, whatever the signature."""
        return self._indexes.get(key)

    def index_lock(self, key: tuple[str, str]) -> asyncio.Lock:
        lock = self._index_locks.get(key)
        if lock is None:
            if len(self._index_locks) > 4 * INDEX_CACHE_SIZE:  # forget the idle ones
                for old in [k for k, v in self._index_locks.items() if not v.locked()]:
                    del self._index_locks[old]
            lock = self._index_locks[key] = asyncio.Lock()
        return lock

    def store_index(
        self, key: tuple[str, str], signature: IndexSignature, index: UserIndex
    ) -> None:
        self._indexes[key] = (signature, index)
        self._indexes.move_to_end(key)
        while len(self._indexes) > INDEX_CACHE_SIZE:
            self._indexes.popitem(last=False)
