"""ConversationMessage: a stored (or about to be stored) message with its reasoning steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from pydantic import BaseModel, Field

from app.conversations.fields import StoredContent, StoredThinkingBlock, StoredToolCall

if TYPE_CHECKING:
    from app.db.models import Message
    from app.wire.chat import AssistantContent, ChatMessage, MessageContent

__all__ = [
    "ConversationMessage",
    "ReasoningStep",
    "HISTORY_COLUMNS",
    "HistoryColumns",
    "prefixed",
    "attach_reasoning_steps",
    "from_history_row",
    "to_conversation_message",
    "turn_start_index",
]


class ReasoningStep(BaseModel):
    """One tool call of an assistant message, paired with its result by ``tool_call_id``."""

    tool_call_id: str
    tool_name: str | None = None
    arguments: str | None = None
    result: StoredContent = None
    result_sequence_number: int | None = None


class ConversationMessage(BaseModel):
    role: str
    content: StoredContent = None
    name: str | None = None
    tool_calls: list[StoredToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    thinking_blocks: list[StoredThinkingBlock] | None = None
    # Per-turn context (memories, date, recalled messages) sent before this user message when
    # it was new; resent with it, byte for byte, so the prompt's prefix stays cacheable.
    context_prefix: str | None = None
    # An assistant answer produced through contextgate: the hash of the prompt it answered.
    prompt_hash: str | None = None
    sequence_number: int = 0
    turn_number: int = 0
    token_count: int = 0
    start_tokens: int = 0
    status: str = "complete"
    stored: bool = True
    content_hash: str = ""
    reasoning_steps: list[ReasoningStep] = Field(default_factory=list)

    @property
    def end_tokens(self) -> int:
        return self.start_tokens + self.token_count

    def to_openai(self, *, with_reasoning: bool = False, with_prefix: bool = True) -> ChatMessage:
        """The message as sent upstream. Reasoning stays in the record unless asked for: the
        assistant messages of the current tool loop carry it back, as providers require. The
        per-turn context goes with the newest user message only (``with_prefix``)."""
        content = self.content
        if self.context_prefix and with_prefix:
            content = prefixed(content, self.context_prefix)
        message = cast("ChatMessage", {"role": self.role, "content": content})  # a stored role
        if with_reasoning:
            if self.thinking_blocks:
                message["thinking_blocks"] = self.thinking_blocks
            if self.reasoning_content:
                message["reasoning_content"] = self.reasoning_content
        if self.name:
            message["name"] = self.name
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            message["tool_call_id"] = self.tool_call_id
        return message


def prefixed(content: AssistantContent, prefix: str) -> MessageContent:
    """``content`` with ``prefix`` before it: a text part first, or a paragraph first."""
    if isinstance(content, list):
        return [{"type": "text", "text": prefix}, *content]
    return f"{prefix}\n\n{content or ''}"


def attach_reasoning_steps(messages: list[ConversationMessage]) -> list[ConversationMessage]:
    """Pair every assistant tool call with the tool message that answers it."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    for message in messages:
        if message.role != "assistant" or not message.tool_calls:
            continue
        steps = []
        for call in message.tool_calls:
            call_id = str(call.get("id") or "")
            function = call.get("function") or {}
            result = results.get(call_id)
            steps.append(
                ReasoningStep(
                    tool_call_id=call_id,
                    tool_name=function.get("name"),
                    arguments=function.get("arguments"),
                    result=result.content if result else None,
                    result_sequence_number=result.sequence_number if result else None,
                )
            )
        message.reasoning_steps = steps
    return messages


def turn_start_index(messages: list[ConversationMessage]) -> int:
    """Index of the newest user message (where the current turn starts); 0 if none."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return 0


# What a stored message keeps of a chat message (the keys every door's turn stores and resends),
# in the order a message rebuilt from them has its keys.
STORED_KEYS = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "reasoning_content",
    "thinking_blocks",
)

# The columns a history read selects, in this order (``from_history_row`` unpacks them).
HISTORY_COLUMNS = (
    *STORED_KEYS,
    "context_prefix",
    "sequence_number",
    "turn_number",
    "token_count",
    "start_tokens",
    "status",
    "content_hash",
    "prompt_hash",
)
# Such a row, typed as the columns are (what ``from_history_row`` reads).
HistoryColumns = tuple[
    str,  # role
    StoredContent,
    str | None,  # name
    list[StoredToolCall] | None,
    str | None,  # tool_call_id
    str | None,  # reasoning_content
    list[StoredThinkingBlock] | None,
    str | None,  # context_prefix
    int,  # sequence_number
    int,  # turn_number
    int,  # token_count
    int,  # start_tokens
    str,  # status
    str,  # content_hash
    str | None,  # prompt_hash
]


def to_conversation_message(row: Message) -> ConversationMessage:
    """A stored message (an ORM row), unvalidated: it was validated before it was stored."""
    return from_history_row(tuple(getattr(row, name) for name in HISTORY_COLUMNS))


def from_history_row(row: Sequence[object]) -> ConversationMessage:
    """A row of ``HISTORY_COLUMNS``, unvalidated. Unpacked by position: reading a row's 15
    columns by name cost more than the rest of building the message, for every message of the
    window on every turn."""
    (
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        reasoning_content,
        thinking_blocks,
        context_prefix,
        sequence_number,
        turn_number,
        token_count,
        start_tokens,
        status,
        content_hash,
        prompt_hash,
    ) = row
    return _construct(
        {
            "role": role,
            "content": content,
            "name": name,
            "tool_calls": tool_calls,
            "tool_call_id": tool_call_id,
            "reasoning_content": reasoning_content,
            "thinking_blocks": thinking_blocks,
            "context_prefix": context_prefix,
            "prompt_hash": prompt_hash,
            "sequence_number": sequence_number,
            "turn_number": turn_number,
            "token_count": token_count,
            "start_tokens": start_tokens,
            "status": status,
            "stored": True,
            "content_hash": content_hash,
            "reasoning_steps": [],
        }
    )


_ALL_FIELDS = frozenset(ConversationMessage.model_fields)
_set = object.__setattr__


def _construct(values: dict[str, object]) -> ConversationMessage:
    """``ConversationMessage.model_construct(**values)`` for a complete set of fields, without
    its per-field default handling: a conversation's history is built this way every turn."""
    message = ConversationMessage.__new__(ConversationMessage)
    _set(message, "__dict__", values)
    _set(message, "__pydantic_fields_set__", set(_ALL_FIELDS))
    _set(message, "__pydantic_extra__", None)
    _set(message, "__pydantic_private__", None)
    return message
