"""What the memory API's routers use of the application's state, as a dependency.

The application's state (``AppState``) sits above the packages and holds this one's parts; a
router below it names only what it uses (the state has every one of them).
"""

from __future__ import annotations

from typing import Annotated, Protocol

from fastapi import Depends, Request

from app.core.database import Database
from app.core.settings import Settings
from app.core.tasks import Tasks
from app.embedders.embedder import Embedder
from app.llm.client import LLMClient
from app.llm.reach import HelperModels
from app.memories.index_refresh import IndexServices
from app.memories.runtime import MemoryRuntime
from app.tokens.counter import TokenCounter

__all__ = ["MemoryParts", "MemoryPartsDep", "get_memory_parts", "index_services"]


class MemoryParts(Protocol):
    """The database and settings, the LLM client (embeddings, the extractor), the token
    counter, the embedder, the cached indexes, the background tasks and the helper models."""

    settings: Settings
    database: Database
    llm: LLMClient
    tokens: TokenCounter
    embedder: Embedder | None
    background: Tasks
    helpers: HelperModels | None
    memory: MemoryRuntime


async def get_memory_parts(request: Request) -> MemoryParts:
    """FastAPI dependency (``async``: no thread hand-off for an attribute lookup)."""
    parts: MemoryParts = request.app.state.contextgate
    return parts


MemoryPartsDep = Annotated[MemoryParts, Depends(get_memory_parts)]


def index_services(parts: MemoryParts) -> IndexServices:
    return IndexServices(parts.database, parts.memory.indexes, parts.embedder, parts.background)
