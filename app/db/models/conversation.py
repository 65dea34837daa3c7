"""A stored conversation: its owner (tenant), running counters and the hash of its last message."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import JSON, Index, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.models.base import Base, new_id, utcnow

if TYPE_CHECKING:
    from app.db.models.message import Message

__all__ = ["Conversation"]


class Conversation(Base):
    __tablename__ = "conversations"
    __table_args__ = (
        Index("ix_conversations_tenant_head", "tenant_id", "head_hash"),
        Index("ix_conversations_tenant_updated", "tenant_id", "updated_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("conv"))
    tenant_id: Mapped[str] = mapped_column(String(64))
    model: Mapped[str | None] = mapped_column(String(200))
    title: Mapped[str | None] = mapped_column(String(200))
    # The Conversations API's metadata (up to 16 string pairs); ``metadata`` is the ORM's own.
    meta: Mapped[dict[str, str] | None] = mapped_column("metadata", JSON, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    # Running counters, maintained on every append, so a request never scans the history.
    message_count: Mapped[int] = mapped_column(default=0)
    total_tokens: Mapped[int] = mapped_column(default=0)
    turn_count: Mapped[int] = mapped_column(default=0)
    system_prompt_count: Mapped[int] = mapped_column(default=0)
    system_prompt_tokens: Mapped[int] = mapped_column(default=0)
    last_user_sequence: Mapped[int | None] = mapped_column(default=None)
    last_user_start_tokens: Mapped[int] = mapped_column(default=0)
    # Hash chain over whole messages; head_hash identifies the exact stored sequence.
    head_hash: Mapped[str] = mapped_column(String(64), default="")
    # Prompt tokens the upstream reported for the last call (drives compaction).
    last_prompt_tokens: Mapped[int | None] = mapped_column(default=None)
    # Compaction boundary: turns <= compacted_turn are covered by summaries; the raw history
    # sent upstream starts at message compacted_sequence, absolute token compacted_tokens.
    compacted_turn: Mapped[int] = mapped_column(default=0)
    compacted_sequence: Mapped[int] = mapped_column(default=0)
    compacted_tokens: Mapped[int] = mapped_column(default=0)
    # on_save memory extraction: turns <= memory_saved_turn were already read.
    memory_saved_turn: Mapped[int] = mapped_column(default=0, server_default="0")
    # Cache-aware fit (app/context/cache_fit.py): history is sent from message
    # cache_cut_sequence (absolute token cache_cut_tokens) on; tool results before
    # cache_cleared_sequence are sent as placeholders. Both only grow.
    cache_cut_sequence: Mapped[int] = mapped_column(default=0, server_default="0")
    cache_cut_tokens: Mapped[int] = mapped_column(default=0, server_default="0")
    cache_cleared_sequence: Mapped[int] = mapped_column(default=0, server_default="0")
    # User messages from cache_prefix_floor on are sent with their frozen per-turn block; it
    # moves to the current turn at each rebase (app/context/cache_fit.py). Only grows.
    cache_prefix_floor: Mapped[int] = mapped_column(default=0, server_default="0")

    messages: Mapped[list[Message]] = relationship(
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="Message.sequence_number",
        lazy="raise",
    )
