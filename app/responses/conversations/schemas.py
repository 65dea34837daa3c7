"""API shapes of the conversations endpoints."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, Field

from app.conversations.fields import StoredContent, StoredThinkingBlock, StoredToolCall
from app.conversations.messages import ReasoningStep
from app.core.timestamps import UtcDatetime
from app.responses.schemas import InputItem
from app.wire.json import JSONObject

__all__ = [
    "ConversationCreate",
    "ConversationDeleted",
    "ConversationDetail",
    "ConversationList",
    "ConversationSummary",
    "ConversationUpdate",
    "ItemsCreate",
    "Metadata",
    "StoredMessage",
]


def _unix(value: object) -> object:
    """A datetime as Unix seconds, as OpenAI's objects carry ``created_at``."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return int(moment.timestamp())
    return value


UnixTime = Annotated[int, BeforeValidator(_unix)]
# OpenAI's limits: up to 16 pairs, keys up to 64 characters, values up to 512.
Metadata = Annotated[
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]],
    Field(max_length=16),
]


class ConversationSummary(BaseModel):
    """OpenAI's Conversation object (id, object, created_at in Unix seconds as OpenAI's
    objects carry it, metadata) and contextgate's fields."""

    id: str
    object: Literal["conversation"] = "conversation"
    created_at: UnixTime
    metadata: Annotated[JSONObject, BeforeValidator(lambda value: value or {})] = Field(
        default_factory=dict, validation_alias=AliasChoices("meta", "metadata")
    )
    title: str | None
    model: str | None
    message_count: int
    total_tokens: int
    updated_at: UtcDatetime  # contextgate's field, in contextgate's form (ISO 8601, UTC)


class StoredMessage(BaseModel):
    role: str
    content: StoredContent
    name: str | None = None
    tool_calls: list[StoredToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    thinking_blocks: list[StoredThinkingBlock] | None = None
    context_prefix: str | None = None  # memories / recalled messages sent before it
    sequence_number: int
    turn_number: int
    token_count: int
    status: str
    reasoning_steps: list[ReasoningStep] = Field(default_factory=list)


class ConversationDetail(ConversationSummary):
    messages: list[StoredMessage]
    summaries: list[JSONObject] = Field(default_factory=list)  # SummaryOut, dumped


class ConversationList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ConversationSummary]
    total: int
    has_more: bool


class ConversationCreate(BaseModel):
    """``POST /v1/conversations``: up to 20 initial items, and metadata."""

    items: list[InputItem] | None = Field(default=None, max_length=20)
    metadata: Metadata | None = None


class ConversationUpdate(BaseModel):
    """``POST /v1/conversations/{id}``: the metadata replaces the stored one."""

    metadata: Metadata


class ItemsCreate(BaseModel):
    """``POST /v1/conversations/{id}/items``."""

    items: list[InputItem] = Field(min_length=1, max_length=20)


class ConversationDeleted(BaseModel):
    id: str
    object: Literal["conversation.deleted"] = "conversation.deleted"
    deleted: bool = True
