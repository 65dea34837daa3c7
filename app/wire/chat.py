"""The chat form: OpenAI's Chat Completions messages, tools and answers, as every door shares them.

contextgate stores and sends conversations in this form. Beside OpenAI's fields a message may
carry what litellm adds for other providers: ``reasoning_content`` (a reasoner's text),
``thinking_blocks`` (Anthropic's thinking blocks, resent byte-for-byte; on the native
Responses path also ``openai_item`` blocks holding Responses items), ``cache_control`` on a
content part, tool or tool call, and ``is_error`` on a tool result.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

from app.wire.anthropic import CacheControl, RedactedThinkingBlock, ThinkingBlock
from app.wire.json import JSONObject

__all__ = [
    "AssistantContent",
    "ChatChoice",
    "ChatCompletion",
    "ChatMessage",
    "ChatTool",
    "ChatUsage",
    "ContentPart",
    "FileData",
    "FilePart",
    "FunctionCall",
    "FunctionDefinition",
    "ImagePart",
    "ImageURL",
    "MessageContent",
    "NamedToolChoice",
    "NativeBlock",
    "Role",
    "TextPart",
    "ThinkingBlockParam",
    "ToolCall",
    "ToolChoice",
]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


# ---- content parts ---------------------------------------------------------------------


class TextPart(TypedDict):
    type: Literal["text"]
    text: str
    cache_control: NotRequired[CacheControl]


class ImageURL(TypedDict):
    url: str
    detail: NotRequired[str]


class ImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: ImageURL
    cache_control: NotRequired[CacheControl]


class FileData(TypedDict, total=False):
    """A file by content (``file_data``, a data URL) or by ``file_id``."""

    file_data: str
    file_id: str
    filename: str


class FilePart(TypedDict):
    type: Literal["file"]
    file: FileData
    cache_control: NotRequired[CacheControl]


ContentPart = TextPart | ImagePart | FilePart
MessageContent = str | list[ContentPart]
AssistantContent = str | list[ContentPart] | None


# ---- tool calls and thinking -----------------------------------------------------------


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON-encoded


class ToolCall(TypedDict):
    """An assistant's tool call (``id`` None while a stream has not named it yet)."""

    id: str | None
    type: Literal["function"]
    function: FunctionCall
    cache_control: NotRequired[CacheControl]


class NativeBlock(TypedDict):
    """A Responses output item kept as it came (reasoning with ``encrypted_content``, hosted
    tool calls), for the native Responses path only."""

    type: Literal["openai_item"]
    item: JSONObject


ThinkingBlockParam = ThinkingBlock | RedactedThinkingBlock | NativeBlock


# ---- the message -----------------------------------------------------------------------


class ChatMessage(TypedDict, total=False):
    """One message of any role; which keys a role has is OpenAI's rule (the chat door's
    pydantic model checks it on the way in)."""

    role: Required[Role]
    content: AssistantContent
    name: str
    tool_calls: list[ToolCall]
    tool_call_id: str | None  # None only as an upstream's call without an id left it
    is_error: bool
    refusal: str
    reasoning_content: str
    thinking_blocks: list[ThinkingBlockParam]


# ---- tools -----------------------------------------------------------------------------


class FunctionDefinition(TypedDict, total=False):
    name: Required[str]
    description: str
    parameters: JSONObject
    strict: bool


class ChatTool(TypedDict):
    type: Literal["function"]
    function: FunctionDefinition
    cache_control: NotRequired[CacheControl]


class NamedFunction(TypedDict):
    name: str


class NamedToolChoice(TypedDict):
    type: Literal["function"]
    function: NamedFunction


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


# ---- the answer ------------------------------------------------------------------------


class ChatUsage(TypedDict, total=False):
    """``usage`` of a chat answer; Anthropic's prompt cache as litellm reports it beside."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: JSONObject
    completion_tokens_details: JSONObject
    cache_read_input_tokens: int
    cache_creation_input_tokens: int


class ChatChoice(TypedDict):
    index: int
    message: ChatMessage
    finish_reason: str
    logprobs: NotRequired[JSONObject | None]


class ChatCompletion(TypedDict, total=False):
    """A ``chat.completion`` as contextgate answers it (normalized from the provider's)."""

    id: str
    object: Required[Literal["chat.completion"]]
    created: int
    model: Required[str]
    choices: Required[list[ChatChoice]]
    system_fingerprint: str
    usage: ChatUsage | None
