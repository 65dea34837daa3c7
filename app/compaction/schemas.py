"""Shapes of what the summarizer must return, and of a summary as the Conversations API lists it.

``MemoryType`` is the kind of a remembered statement: a summary's facts and a long-term memory
share it (app.memories.schemas re-exports it).
"""

from __future__ import annotations

from typing import Literal, cast, get_args

from pydantic import BaseModel, Field

from app.core.timestamps import UtcDatetime
from app.db.models.summary import SummaryFact

__all__ = ["MEMORY_TYPES", "Fact", "MemoryType", "SummaryOut", "SummaryOutput"]

MemoryType = Literal[
    "fact",
    "preference",
    "decision",
    "discovery",
    "behavior",
    "outcome",
    "insight",
    "error_lesson",
    "note",
]
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)


# ---- model outputs (validated; anything else is a failed call) ------------------------------
class Fact(BaseModel):
    fact: str = Field(min_length=1, max_length=2000)
    type: MemoryType = "fact"
    importance: int = Field(5, ge=1, le=10)
    confidence: float = Field(0.8, ge=0, le=1)

    def stored(self) -> SummaryFact:
        """The fact as a summary row stores it (its four fields)."""
        return cast(SummaryFact, self.model_dump())


class SummaryOutput(BaseModel):
    """The summarizer's answer for a compaction or a merge."""

    episodic: str = Field(min_length=1, max_length=20_000)
    facts: list[Fact] = Field(default_factory=list, max_length=100)


class SummaryOut(BaseModel):
    """A compaction summary as GET /v1/conversations/{id} lists it."""

    id: str
    level: int
    first_turn: int
    last_turn: int
    start_tokens: int
    end_tokens: int
    episodic: str
    facts: list[dict[str, object]]
    token_count: int
    merged_into: str | None
    kind: str = "compaction"  # or "periodic" (every N message pairs)
    method: str = "llm"  # or "rule_based" (the summarizer failed)
    model: str | None
    cost: float
    created_at: UtcDatetime
