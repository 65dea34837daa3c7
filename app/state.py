"""The application's long-lived parts, built once at start-up (``app.main.build_state``).

It sits above every package whose services it holds: the doors and the turn pipeline take it
whole, the packages below it declare the few services they use as a ``Protocol`` (``Storage``,
``Gate``, ``EngineServices``…) that ``AppState`` fulfils (checked by mypy at the bottom of this
file). Nothing long-lived is read from ``app.state`` by ``getattr`` or built lazily on first use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

from app.core.database import Database
from app.core.settings import Settings
from app.core.tasks import Tasks

if TYPE_CHECKING:
    # Type-only: the CLI's database commands import this module and should not pay for
    # importing litellm (seconds of CPU) to open a database.
    from redis.asyncio import Redis

    from app.conversations.claims import HeadClaims
    from app.embedders.embedder import Embedder
    from app.keys.caller import Caller
    from app.keys.limits import KeyLimits
    from app.keys.service import KeyService
    from app.keys.throttle import AuthThrottle
    from app.llm.client import LLMClient
    from app.llm.reach import HelperModels
    from app.memories.runtime import MemoryRuntime
    from app.summary_cache.summary import SummaryCache
    from app.tokens.calibration import TokenCalibration
    from app.tokens.counter import TokenCounter

__all__ = ["AppState", "StateDep", "get_state"]


@dataclass(slots=True)
class AppState:
    settings: Settings
    database: Database
    llm: LLMClient
    tokens: TokenCounter
    # Per-key limits: requests per minute (every authenticated endpoint) and budget (turns).
    limits: KeyLimits
    # Failed-auth throttling per client address (/v1 and /ui/login).
    auth_throttle: AuthThrottle
    # Compaction locks and retrieval caches of the memory domain.
    memory: MemoryRuntime
    # Conversation ends that turns of this process continue (Responses' previous_response_id).
    continuations: HeadClaims
    # Per model, the provider's tokens per contextgate token (app/tokens/calibration.py).
    calibration: TokenCalibration
    # Virtual keys: issue, list, revoke, resolve (None without CONTEXTGATE_MASTER_KEY).
    keys: KeyService | None = None
    # One Redis client shared by the limits and the memory locks (None: no CONTEXTGATE_REDIS_URL).
    redis: Redis | None = None
    # Resolves a presented virtual key to its caller (``keys.resolve``; tests may swap it).
    key_resolver: Callable[[str], Awaitable[Caller | None]] | None = None
    # Fire-and-forget work (memory extraction, …) kept referenced until it finishes.
    background: Tasks = field(default_factory=set)
    # Summaries of artifacts, in-process or Redis (None: no caching).
    summary_cache: SummaryCache | None = None
    # The planner/summarizer/embedding models checked at start (app/llm/reach.py); None: as set.
    helpers: HelperModels | None = None
    # Embeddings for memory retrieval and message recall (None: BM25 only; see embedder.py).
    embedder: Embedder | None = None


async def get_state(request: Request) -> AppState:
    """FastAPI dependency. ``async`` on purpose: FastAPI runs a plain ``def`` dependency on
    its thread pool, a thread hand-off on every request for an attribute lookup."""
    state: AppState = request.app.state.contextgate
    return state


StateDep = Annotated[AppState, Depends(get_state)]


if TYPE_CHECKING:
    from app.context.inputs import EngineServices
    from app.core.deps import Storage
    from app.keys.auth import Gate
    from app.llm.reach import HelperSource
    from app.memories.deps import MemoryParts

    def _fulfils(
        state: AppState,
    ) -> tuple[Storage, Gate, EngineServices, HelperSource, MemoryParts]:
        """The services the packages below ask for, by ``Protocol``: mypy checks here that
        the state has every one of them, with the same types."""
        return state, state, state, state, state
