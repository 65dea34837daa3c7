"""OpenAI Responses: input and output items, content parts, usage and stream events.

Items contextgate builds are typed one by one; what the provider's own Responses API returns
on the native path (hosted tool calls, reasoning with ``encrypted_content``, items added
later) is passed on as it came (``JSONObject``).
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

from app.wire.json import JSONObject

__all__ = [
    "CompactionItem",
    "EventFields",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "InputContentPart",
    "InputFilePart",
    "InputImagePart",
    "InputItem",
    "InputTextPart",
    "ItemStatus",
    "MessageItem",
    "OutputItem",
    "OutputTextPart",
    "ReasoningItem",
    "ResponseError",
    "ResponseOutput",
    "ResponsesEvent",
    "ResponsesUsage",
    "SummaryText",
]

ItemStatus = Literal["in_progress", "completed", "incomplete"]


# ---- content parts ---------------------------------------------------------------------


class InputTextPart(TypedDict):
    type: Literal["input_text"]
    text: str


class OutputTextPart(TypedDict):
    type: Literal["output_text"]
    text: str
    annotations: list[JSONObject]


class InputImagePart(TypedDict):
    type: Literal["input_image"]
    image_url: str | None
    detail: NotRequired[str]


class InputFilePart(TypedDict, total=False):
    type: Required[Literal["input_file"]]
    file_data: str
    file_id: str
    filename: str


InputContentPart = InputTextPart | InputImagePart | InputFilePart


class SummaryText(TypedDict):
    type: Literal["summary_text"]
    text: str


# ---- items -----------------------------------------------------------------------------


class MessageItem(TypedDict, total=False):
    """A message: an input one (string or parts) or an assistant's output (output_text)."""

    id: str
    type: Required[Literal["message"]]
    role: Required[str]
    status: ItemStatus
    content: Required[str | list[InputContentPart] | list[OutputTextPart]]


class FunctionCallItem(TypedDict, total=False):
    id: str
    type: Required[Literal["function_call"]]
    status: ItemStatus
    call_id: Required[str]
    name: Required[str]
    arguments: Required[str]


class FunctionCallOutputItem(TypedDict, total=False):
    id: str
    type: Required[Literal["function_call_output"]]
    status: ItemStatus
    call_id: Required[str]
    output: Required[str | list[InputContentPart]]


class ReasoningItem(TypedDict, total=False):
    """Reasoning: its summary, and the thinking itself encrypted (the provider's, or
    contextgate's own ``cg1:`` envelope of thinking blocks)."""

    id: Required[str]
    type: Required[Literal["reasoning"]]
    summary: Required[list[SummaryText]]
    encrypted_content: str


class CompactionItem(TypedDict, total=False):
    """What ``/responses/compact`` returns in place of the compacted turns."""

    id: Required[str]
    type: Required[Literal["compaction"]]
    encrypted_content: Required[str]
    created_by: str


InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem
OutputItem = MessageItem | FunctionCallItem | ReasoningItem | CompactionItem
ResponseOutput = OutputItem | JSONObject  # built here, or the provider's (native) as it came


# ---- the response ----------------------------------------------------------------------


class ResponsesUsage(TypedDict):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class ResponseError(TypedDict):
    code: str
    message: str


class EventFields(TypedDict, total=False):
    """What a typed stream event carries beside its ``type`` and ``sequence_number``; which
    fields an event has is its type's (``response.output_text.delta``: item_id,
    output_index, content_index, delta, logprobs…)."""

    response: JSONObject
    item: ResponseOutput
    item_id: str
    output_index: int
    content_index: int
    summary_index: int
    delta: str
    text: str
    name: str
    arguments: str
    part: SummaryText | OutputTextPart
    logprobs: list[JSONObject]


class ResponsesEvent(EventFields, total=False):
    """One typed stream event (``response.output_text.delta``, ``response.completed``…)."""

    type: Required[str]
    sequence_number: int
