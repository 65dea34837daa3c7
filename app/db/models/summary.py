"""A compaction summary of a conversation: episodic text and semantic facts for a turn range.

Summaries are added, never edited: a hierarchical merge writes a higher-level summary and points
the merged ones at it (``merged_into``); the raw messages they cover stay stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import NotRequired, TypedDict

from sqlalchemy import JSON, Float, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, new_id, utcnow

__all__ = ["ConversationSummaryRow", "SummaryFact"]


class SummaryFact(TypedDict):
    """A semantic fact of a summary: the summarizer's (app/compaction/schemas.Fact, with its
    confidence) or the rule-based fallback's."""

    fact: str
    type: str
    importance: int
    confidence: NotRequired[float]


class ConversationSummaryRow(Base):
    __tablename__ = "conversation_summaries"
    __table_args__ = (
        Index("ix_conversation_summaries_conversation_turn", "conversation_id", "first_turn"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("sum"))
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    tenant_id: Mapped[str] = mapped_column(String(64))
    # 0: made from raw turns; n + 1: made by merging summaries of level <= n.
    level: Mapped[int] = mapped_column(default=0)
    first_turn: Mapped[int]
    last_turn: Mapped[int]
    # Absolute token positions [start_tokens, end_tokens) of the raw messages covered.
    start_tokens: Mapped[int] = mapped_column(default=0)
    end_tokens: Mapped[int] = mapped_column(default=0)
    episodic: Mapped[str] = mapped_column(Text)
    facts: Mapped[list[SummaryFact]] = mapped_column(JSON, default=list)
    token_count: Mapped[int] = mapped_column(default=0)
    # The higher-level summary this one was merged into; None while it is active.
    merged_into: Mapped[str | None] = mapped_column(String(40), default=None)
    model: Mapped[str | None] = mapped_column(String(200))
    # "compaction" (under token pressure; forms the memory bundle) or "periodic" (every N
    # message pairs; listed, not injected). method: "llm", or "rule_based" when the
    # summarizer failed and the summary was extracted by rules instead.
    kind: Mapped[str] = mapped_column(String(20), default="compaction", server_default="compaction")
    method: Mapped[str] = mapped_column(String(20), default="llm", server_default="llm")
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
