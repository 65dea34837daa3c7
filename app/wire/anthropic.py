"""Anthropic Messages: content blocks, the ``message`` answer, its usage and stream events.

Shapes as Anthropic's API reference defines them; thinking blocks also travel in the chat
form's ``thinking_blocks`` (litellm's shape is Anthropic's), kept byte-for-byte.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

from app.wire.json import JSONObject

__all__ = [
    "AnthropicMessage",
    "AnthropicUsage",
    "CacheControl",
    "CacheCreation",
    "ContentBlock",
    "ContentBlockDelta",
    "ContentBlockDeltaEvent",
    "ContentBlockStartEvent",
    "ContentBlockStopEvent",
    "InputJSONDelta",
    "MessageDeltaEvent",
    "MessageStartEvent",
    "MessageStopEvent",
    "PingEvent",
    "SignatureDelta",
    "TextDelta",
    "ThinkingDelta",
    "RedactedThinkingBlock",
    "StreamEvent",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
]


CacheControl = JSONObject
"""``{"type": "ephemeral", "ttl": "5m" | "1h"}`` on a block, tool or tool call: passed on as
the client set it (Anthropic adds fields to it now and then)."""


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: JSONObject


class ThinkingBlock(TypedDict):
    """Extended thinking; ``signature`` arrives last in a stream (a block being built has
    none yet) and is empty for another provider's reasoning."""

    type: Literal["thinking"]
    thinking: str
    signature: NotRequired[str]


class RedactedThinkingBlock(TypedDict):
    type: Literal["redacted_thinking"]
    data: str


ContentBlock = TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock


class CacheCreation(TypedDict):
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int


class AnthropicUsage(TypedDict, total=False):
    input_tokens: Required[int]
    output_tokens: Required[int]
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    cache_creation: CacheCreation


class AnthropicMessage(TypedDict, total=False):
    """The ``message`` object (an answer, or ``message_start``'s opening one)."""

    id: Required[str]
    type: Required[Literal["message"]]
    role: Required[Literal["assistant"]]
    model: Required[str]
    content: Required[list[ContentBlock]]
    stop_reason: Required[str | None]
    stop_sequence: Required[str | None]
    usage: Required[AnthropicUsage]


# ---- stream ----------------------------------------------------------------------------


class TextDelta(TypedDict):
    type: Literal["text_delta"]
    text: str


class InputJSONDelta(TypedDict):
    type: Literal["input_json_delta"]
    partial_json: str


class ThinkingDelta(TypedDict):
    type: Literal["thinking_delta"]
    thinking: str


class SignatureDelta(TypedDict):
    type: Literal["signature_delta"]
    signature: str


ContentBlockDelta = TextDelta | InputJSONDelta | ThinkingDelta | SignatureDelta


class MessageStartEvent(TypedDict):
    type: Literal["message_start"]
    message: AnthropicMessage


class PingEvent(TypedDict):
    type: Literal["ping"]


class ContentBlockStartEvent(TypedDict):
    type: Literal["content_block_start"]
    index: int
    content_block: ContentBlock


class ContentBlockDeltaEvent(TypedDict):
    type: Literal["content_block_delta"]
    index: int
    delta: ContentBlockDelta


class ContentBlockStopEvent(TypedDict):
    type: Literal["content_block_stop"]
    index: int


class MessageDeltaBody(TypedDict):
    stop_reason: str
    stop_sequence: str | None


class MessageDeltaEvent(TypedDict, total=False):
    """The stop reason and final usage; contextgate's fields (conversation_id, cost,
    context_utilization) and ``context_management`` ride beside them."""

    type: Required[Literal["message_delta"]]
    delta: Required[MessageDeltaBody]
    usage: Required[AnthropicUsage]
    context_management: object


class MessageStopEvent(TypedDict):
    type: Literal["message_stop"]


StreamEvent = (
    MessageStartEvent
    | PingEvent
    | ContentBlockStartEvent
    | ContentBlockDeltaEvent
    | ContentBlockStopEvent
    | MessageDeltaEvent
    | MessageStopEvent
)
