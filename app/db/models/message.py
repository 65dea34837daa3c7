"""One stored message; raw messages are never deleted by context management."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, utcnow
from app.wire.chat import AssistantContent

__all__ = ["Message"]


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("conversation_id", "sequence_number"),
        Index("ix_messages_conversation_start_tokens", "conversation_id", "start_tokens"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=False
    )
    tenant_id: Mapped[str] = mapped_column(String(64))
    sequence_number: Mapped[int]
    turn_number: Mapped[int] = mapped_column(default=0)
    role: Mapped[str] = mapped_column(String(20))
    content: Mapped[AssistantContent] = mapped_column(JSON, nullable=True)
    name: Mapped[str | None] = mapped_column(String(200))
    # Each a wire.chat ToolCall / ThinkingBlockParam: to be typed so once app/inspect and
    # app/responses read them as such (they take plain dicts).
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    tool_call_id: Mapped[str | None] = mapped_column(String(200))
    reasoning_content: Mapped[str | None] = mapped_column(Text)
    # Thinking / redacted-thinking blocks with their signatures, exactly as the provider sent them.
    thinking_blocks: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    # The per-turn context sent before this user message (see ConversationMessage).
    context_prefix: Mapped[str | None] = mapped_column(Text)
    # An assistant answer's: the hash of the prompt it was produced for (app/context/seal.py).
    prompt_hash: Mapped[str | None] = mapped_column(String(32))
    token_count: Mapped[int] = mapped_column(default=0)
    # Tokens of every earlier message of the conversation: lets a request load only the tail
    # that fits with one indexed range query, however long the conversation.
    start_tokens: Mapped[int] = mapped_column(default=0)
    chain_hash: Mapped[str] = mapped_column(String(64))
    content_hash: Mapped[str] = mapped_column(String(64))
    # "complete", or "incomplete" for a streamed answer cut short.
    status: Mapped[str] = mapped_column(String(16), default="complete")
    request_id: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
