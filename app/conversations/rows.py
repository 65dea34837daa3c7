"""The rows this package writes with core statements (executemany, guarded UPDATE), column by
column as the ORM models declare them."""

from __future__ import annotations

from typing import TypedDict

from app.conversations.fields import StoredContent, StoredThinkingBlock, StoredToolCall

__all__ = ["CounterValues", "MessageRow", "ResponseItemRow"]


class MessageRow(TypedDict):
    """A whole ``messages`` row (every column but the id and ``created_at``)."""

    conversation_id: str
    tenant_id: str
    sequence_number: int
    turn_number: int
    role: str
    content: StoredContent
    name: str | None
    tool_calls: list[StoredToolCall] | None
    tool_call_id: str | None
    reasoning_content: str | None
    thinking_blocks: list[StoredThinkingBlock] | None
    context_prefix: str | None
    prompt_hash: str | None
    token_count: int
    start_tokens: int
    chain_hash: str
    content_hash: str
    status: str
    request_id: str | None


class CounterValues(TypedDict):
    """A conversation's running counters, as its columns are named."""

    message_count: int
    total_tokens: int
    turn_count: int
    system_prompt_count: int
    system_prompt_tokens: int
    last_user_sequence: int | None
    last_user_start_tokens: int
    head_hash: str


class ResponseItemRow(TypedDict):
    """Where a stored Response's output item lives (``response_items``, less ``created_at``)."""

    id: str
    tenant_id: str
    response_id: str
    conversation_id: str
    sequence_number: int
    position: int
