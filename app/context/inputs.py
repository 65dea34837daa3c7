"""What the context engine is given: the services it uses of the application's state
(``app.state.AppState`` has them) and the turn's window it rewrites."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from app.context.artifacts import Artifact
from app.context.budget import TokenBudget
from app.context.history import HistoryWindow
from app.core.settings import Settings
from app.llm.client import LLMClient
from app.llm.reach import HelperModels
from app.summary_cache.summary import SummaryCache
from app.tokens.counter import TokenCounter

__all__ = ["EngineServices", "EngineWindow"]


class EngineServices(Protocol):
    settings: Settings
    llm: LLMClient
    tokens: TokenCounter
    # Summaries of artifacts, in-process or Redis (None: no caching).
    summary_cache: SummaryCache | None
    # The planner/summarizer/embedding models checked at start (None: as configured).
    helpers: HelperModels | None


@dataclass(frozen=True, slots=True)
class EngineWindow:
    """The loaded window (rewritten in place), the budget it is planned within (the engine's
    result carries it with ``current`` of the rewritten turn) and the request's attachments.
    ``historical_turns``: how many past turns' tool results may be reprocessed (None: the
    setting; 0 under the cache-aware fit, which keeps history byte-stable instead)."""

    window: HistoryWindow
    budget: TokenBudget
    attachments: list[Artifact] = field(default_factory=list)
    historical_turns: int | None = None
