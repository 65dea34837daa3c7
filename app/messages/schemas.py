"""Anthropic's Messages API request as pydantic models (the wire format, nothing translated).

Blocks keep fields contextgate does not know (``citations``, …) as extras and ignore them;
fields Anthropic requires are required here too, so bad input is a 400 before anything runs.
contextgate's own extensions (``conversation_id``, ``context``, ``attachments``) ride along
as in the chat door (the Anthropic SDK sends them through ``extra_body``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.messages.context_editing import ContextManagement
from app.messages.types import DocumentSource, ImageSource
from app.protocol.bounds import MAX_USER_CHARS
from app.protocol.chat import AttachmentRef, ContextOptions
from app.wire.anthropic import CacheControl
from app.wire.json import JSONObject

__all__ = [
    "ContentBlock",
    "CountTokensRequest",
    "DocumentBlock",
    "ImageBlock",
    "MessageParam",
    "MessagesRequest",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "ThinkingConfig",
    "Tool",
    "ToolChoice",
    "ToolResultBlock",
    "ToolUseBlock",
]


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow")

    cache_control: CacheControl | None = None


class TextBlock(_Block):
    type: Literal["text"]
    text: str


class ImageBlock(_Block):
    type: Literal["image"]
    source: ImageSource

    @model_validator(mode="after")
    def _known_source(self) -> ImageBlock:
        source: Mapping[str, object] = self.source
        kind = source.get("type")
        if kind == "base64":
            if not isinstance(source.get("data"), str) or not isinstance(
                source.get("media_type"), str
            ):
                raise ValueError("a base64 image source needs 'media_type' and 'data'")
        elif kind == "url":
            if not isinstance(source.get("url"), str):
                raise ValueError("a url image source needs 'url'")
        else:
            raise ValueError("image source type must be 'base64' or 'url'")
        return self


class DocumentBlock(_Block):
    type: Literal["document"]
    source: DocumentSource
    title: str | None = None
    context: str | None = None

    @model_validator(mode="after")
    def _known_source(self) -> DocumentBlock:
        source: Mapping[str, object] = self.source
        kind = source.get("type")
        if kind == "text" and isinstance(source.get("data"), str):
            return self
        if kind == "base64" and isinstance(source.get("data"), str):
            return self
        if kind == "url" and isinstance(source.get("url"), str):
            return self
        raise ValueError("document source must be text, base64 (with 'data') or url")


class ToolUseBlock(_Block):
    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: JSONObject  # the tool's arguments, passed on


ToolResultContent = Annotated[TextBlock | ImageBlock | DocumentBlock, Field(discriminator="type")]


class ToolResultBlock(_Block):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: str | list[ToolResultContent] | None = None
    is_error: bool | None = None


class ThinkingBlock(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["redacted_thinking"]
    data: str


ContentBlock = Annotated[
    TextBlock
    | ImageBlock
    | DocumentBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock,
    Field(discriminator="type"),
]


class MessageParam(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]

    @model_validator(mode="after")
    def _blocks_per_role(self) -> MessageParam:
        if isinstance(self.content, str):
            return self
        for block in self.content:
            if self.role == "user" and block.type in ("tool_use", "thinking", "redacted_thinking"):
                raise ValueError(f"'{block.type}' blocks belong in assistant messages")
            if self.role == "assistant" and block.type in ("tool_result", "image", "document"):
                raise ValueError(f"'{block.type}' blocks belong in user messages")
        return self


class Tool(BaseModel):
    """A client tool (``input_schema``); Anthropic's server tools have no schema to translate."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    description: str | None = None
    input_schema: JSONObject  # a JSON schema, passed on
    type: str | None = None
    cache_control: CacheControl | None = None


class ToolChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None

    @model_validator(mode="after")
    def _name_for_tool(self) -> ToolChoice:
        if self.type == "tool" and not self.name:
            raise ValueError("tool_choice of type 'tool' needs 'name'")
        return self


class ThinkingConfig(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _budget_when_enabled(self) -> ThinkingConfig:
        if self.type == "enabled" and self.budget_tokens is None:
            raise ValueError("thinking of type 'enabled' needs 'budget_tokens'")
        return self


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    user_id: str | None = Field(default=None, max_length=MAX_USER_CHARS)


class _Common(BaseModel):
    """Fields shared by messages.create and messages.count_tokens."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    messages: list[MessageParam] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: ThinkingConfig | None = None

    # contextgate's extensions
    conversation_id: str | None = None
    attachments: list[AttachmentRef] = Field(default_factory=list)
    context: ContextOptions = Field(default_factory=ContextOptions)

    @field_validator("messages")
    @classmethod
    def _content_not_empty(cls, messages: list[MessageParam]) -> list[MessageParam]:
        # Anthropic's rule: "all messages must have non-empty content except for the optional
        # final assistant message" (an empty prefill).
        for index, message in enumerate(messages):
            final_assistant = index == len(messages) - 1 and message.role == "assistant"
            if not message.content and not final_assistant:
                raise ValueError(
                    f"messages.{index}: all messages must have non-empty content except for "
                    "the optional final assistant message"
                )
        return messages


class MessagesRequest(_Common):
    max_tokens: int = Field(ge=1)
    stream: bool = False
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    metadata: Metadata | None = None
    # Anthropic's context editing: done by contextgate, never forwarded (context_editing.py).
    context_management: ContextManagement | None = None

    @model_validator(mode="after")
    def _thinking_fits(self) -> MessagesRequest:
        budget = self.thinking.budget_tokens if self.thinking else None
        if self.thinking and self.thinking.type == "enabled" and budget is not None:
            if budget >= self.max_tokens:
                raise ValueError("`max_tokens` must be greater than `thinking.budget_tokens`")
        return self


class CountTokensRequest(_Common):
    pass
