"""API shapes of the conversations endpoints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.conversations.messages import ReasoningStep
from app.core.timestamps import UtcDatetime

__all__ = [
    "ConversationDeleted",
    "ConversationDetail",
    "ConversationList",
    "ConversationSummary",
    "StoredMessage",
]


class ConversationSummary(BaseModel):
    id: str
    object: Literal["conversation"] = "conversation"
    title: str | None
    model: str | None
    message_count: int
    total_tokens: int
    created_at: UtcDatetime
    updated_at: UtcDatetime


class StoredMessage(BaseModel):
    role: str
    content: Any
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    thinking_blocks: list[dict[str, Any]] | None = None
    context_prefix: str | None = None  # memories / recalled messages sent before it
    sequence_number: int
    turn_number: int
    token_count: int
    status: str
    reasoning_steps: list[ReasoningStep] = Field(default_factory=list)


class ConversationDetail(ConversationSummary):
    messages: list[StoredMessage]
    summaries: list[dict[str, Any]] = Field(default_factory=list)


class ConversationList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ConversationSummary]
    total: int
    has_more: bool


class ConversationDeleted(BaseModel):
    id: str
    object: Literal["conversation.deleted"] = "conversation.deleted"
    deleted: bool = True
