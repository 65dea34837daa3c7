"""The memory domain's long-lived parts: compaction locks, users' retrieval indexes, and the
message vectors of recall (a cache and the background backlog)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.compaction.locks import ConversationLocks
from app.core.database import Database
from app.core.settings import Settings
from app.memories.indexes import MemoryIndexes
from app.recall.services import VectorBacklog
from app.recall.vector_sets import VectorCache

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["MemoryRuntime"]


class MemoryRuntime:
    def __init__(self, settings: Settings, database: Database, redis: Redis | None = None) -> None:
        # ``redis``: the state's shared client (its owner closes it).
        self.locks = ConversationLocks(
            redis=redis,
            engine=database.engine,
            use_advisory=settings.database_url.startswith("postgresql"),
        )
        # (tenant, user) -> (signature, index) of long-term memory retrieval.
        self.indexes = MemoryIndexes()
        # Conversations' message vectors for message recall, loaded incrementally.
        self.recall_vectors = VectorCache()
        # Message vectors embedded after the turn, one job per conversation, at a bounded rate.
        self.vector_backlog = VectorBacklog()
