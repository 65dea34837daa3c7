"""What the context engine uses of the application's state (``app.state.AppState`` has it)."""

from __future__ import annotations

from typing import Protocol

from app.core.settings import Settings
from app.llm.client import LLMClient
from app.llm.reach import HelperModels
from app.summary_cache.summary import SummaryCache
from app.tokens.counter import TokenCounter

__all__ = ["EngineServices"]


class EngineServices(Protocol):
    settings: Settings
    llm: LLMClient
    tokens: TokenCounter
    # Summaries of artifacts, in-process or Redis (None: no caching).
    summary_cache: SummaryCache | None
    # The planner/summarizer/embedding models checked at start (None: as configured).
    helpers: HelperModels | None
