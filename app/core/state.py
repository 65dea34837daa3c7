"""The application's long-lived parts, built once in the lifespan and read by dependencies."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Request

from app.core.database import Database
from app.core.settings import Settings

if TYPE_CHECKING:
    # Type-only: the CLI's database commands import this module and should not pay for
    # importing litellm (seconds of CPU) to open a database.
    from app.cache.summary import SummaryCache
    from app.context.tokens import TokenCounter
    from app.keys.auth import Caller
    from app.llm.client import LLMClient
    from app.memories.runtime import MemoryRuntime

__all__ = ["AppState", "get_state"]


@dataclass(slots=True)
class AppState:
    settings: Settings
    database: Database
    llm: LLMClient
    tokens: TokenCounter
    # Resolves a presented virtual key to its caller (installed by the keys domain).
    key_resolver: Callable[[str], Awaitable[Caller | None]] | None = None
    # Fire-and-forget work (memory extraction, …) kept referenced until it finishes.
    background: set[Any] = field(default_factory=set)
    # Compaction locks and retrieval caches of the memory domain (built in build_state).
    memory: MemoryRuntime | None = None
    # Summaries of artifacts, in-process or Redis (built in the lifespan; None: no caching).
    summary_cache: SummaryCache | None = None


async def get_state(request: Request) -> AppState:
    """FastAPI dependency. ``async`` on purpose: FastAPI runs a plain ``def`` dependency on
    its thread pool, a thread hand-off on every request for an attribute lookup."""
    state: AppState = request.app.state.contextgate
    return state
