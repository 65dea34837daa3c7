"""The chat stream: ``chat.completion.chunk`` and its deltas, as upstream chunks are normalized
(app/llm/responses.py) and every door's stream renderer reads them."""

from __future__ import annotations

from typing import Literal, Required, TypedDict

from app.wire.chat import ChatUsage, ThinkingBlockParam
from app.wire.json import JSONObject

__all__ = ["ChatChunk", "ChunkChoice", "Delta", "FunctionDelta", "ToolCallDelta"]


class FunctionDelta(TypedDict, total=False):
    name: str
    arguments: str


class ToolCallDelta(TypedDict, total=False):
    """A piece of a tool call: ``index`` says which; id, type and name come with the first."""

    index: Required[int]
    id: str
    type: Literal["function"]
    function: FunctionDelta


class Delta(TypedDict, total=False):
    role: str
    content: str
    reasoning_content: str
    thinking_blocks: list[ThinkingBlockParam]
    tool_calls: list[ToolCallDelta]


class ChunkChoice(TypedDict, total=False):
    index: Required[int]
    delta: Required[Delta]
    finish_reason: str | None
    logprobs: JSONObject | None


class ChatChunk(TypedDict, total=False):
    """One normalized chunk; on the native Responses path it carries the typed event it came
    from (``responses_event``) for the Responses door to pass on."""

    id: str | None
    object: Literal["chat.completion.chunk"]
    created: int | None
    model: str
    system_fingerprint: str | None
    choices: Required[list[ChunkChoice]]
    usage: ChatUsage | None
    responses_event: JSONObject  # the provider's event, passed on as it came
