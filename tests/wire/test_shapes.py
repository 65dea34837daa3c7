"""app/wire's shapes are the providers' own: every key a TypedDict names is one the official
SDK's type for that shape has (or a documented extension), and every ``type`` literal is the
SDK's. A misspelt key or a renamed type in app/wire fails here, not at a provider."""

from __future__ import annotations

import typing
from typing import Any, Literal, get_args, get_origin

import anthropic.types as a
import openai.types.chat as oc
import openai.types.responses as r
import pytest
from openai.types.chat.chat_completion_chunk import (
    Choice as ChunkChoiceModel,
)
from openai.types.chat.chat_completion_chunk import (
    ChoiceDelta,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)
from openai.types.chat.chat_completion_content_part_image_param import ImageURL as SDKImageURL
from openai.types.chat.chat_completion_content_part_param import File, FileFile
from openai.types.chat.chat_completion_message_function_tool_call_param import (
    Function as SDKFunction,
)
from openai.types.completion_usage import CompletionUsage
from openai.types.responses.response_input_param import FunctionCallOutput
from openai.types.responses.response_reasoning_item import Summary
from openai.types.shared_params import FunctionDefinition as SDKFunctionDefinition

from app.wire import anthropic as wa
from app.wire import chat as wc
from app.wire import responses as wr
from app.wire import stream as ws

# What contextgate adds to a shape (module docstrings of app/wire say why).
CACHE = {"cache_control"}  # Anthropic's prompt cache marks, where litellm reads them
REASONING = {"reasoning_content", "thinking_blocks"}  # litellm's reasoning fields
CACHE_USAGE = {"cache_read_input_tokens", "cache_creation_input_tokens"}  # litellm's usage
# One ChatMessage holds every role's keys: a tool result's (and its is_error), an answer's.
OTHER_ROLES = {"tool_call_id", "is_error"}
ASSISTANT_ONLY = {"name", "tool_calls", "refusal", "is_error"}

PAIRS: list[tuple[Any, Any, set[str]]] = [
    # chat form
    (wc.TextPart, oc.ChatCompletionContentPartTextParam, CACHE),
    (wc.ImagePart, oc.ChatCompletionContentPartImageParam, CACHE),
    (wc.ImageURL, SDKImageURL, set()),
    (wc.FilePart, File, CACHE),
    (wc.FileData, FileFile, set()),
    (wc.FunctionCall, SDKFunction, set()),
    (wc.ToolCall, oc.ChatCompletionMessageFunctionToolCallParam, CACHE),
    (wc.FunctionDefinition, SDKFunctionDefinition, set()),
    (wc.ChatTool, oc.ChatCompletionFunctionToolParam, CACHE),
    (wc.ChatMessage, oc.ChatCompletionAssistantMessageParam, OTHER_ROLES | REASONING),
    (wc.ChatMessage, oc.ChatCompletionToolMessageParam, ASSISTANT_ONLY | REASONING),
    (wc.ChatCompletion, oc.ChatCompletion, set()),
    (wc.ChatChoice, oc.chat_completion.Choice, set()),
    (wc.ChatUsage, CompletionUsage, CACHE_USAGE),
    # chat stream
    (ws.ChatChunk, oc.ChatCompletionChunk, {"responses_event"}),
    (ws.ChunkChoice, ChunkChoiceModel, set()),
    (ws.Delta, ChoiceDelta, REASONING),
    (ws.ToolCallDelta, ChoiceDeltaToolCall, set()),
    (ws.FunctionDelta, ChoiceDeltaToolCallFunction, set()),
    # Anthropic
    (wa.TextBlock, a.TextBlock, set()),
    (wa.ToolUseBlock, a.ToolUseBlock, set()),
    (wa.ThinkingBlock, a.ThinkingBlock, set()),
    (wa.RedactedThinkingBlock, a.RedactedThinkingBlock, set()),
    (wa.AnthropicMessage, a.Message, set()),
    (wa.AnthropicUsage, a.Usage, set()),
    (wa.MessageStartEvent, a.RawMessageStartEvent, set()),
    (wa.ContentBlockStartEvent, a.RawContentBlockStartEvent, set()),
    (wa.ContentBlockDeltaEvent, a.RawContentBlockDeltaEvent, set()),
    (wa.ContentBlockStopEvent, a.RawContentBlockStopEvent, set()),
    (wa.MessageDeltaEvent, a.RawMessageDeltaEvent, {"context_management"}),
    (wa.MessageStopEvent, a.RawMessageStopEvent, set()),
    (wa.TextDelta, a.TextDelta, set()),
    (wa.InputJSONDelta, a.InputJSONDelta, set()),
    (wa.ThinkingDelta, a.ThinkingDelta, set()),
    (wa.SignatureDelta, a.SignatureDelta, set()),
    # Responses
    (wr.InputTextPart, r.ResponseInputText, set()),
    (wr.OutputTextPart, r.ResponseOutputText, set()),
    (wr.InputImagePart, r.ResponseInputImage, set()),
    (wr.InputFilePart, r.ResponseInputFile, set()),
    (wr.SummaryText, Summary, set()),
    (wr.MessageItem, r.ResponseOutputMessage, set()),
    (wr.FunctionCallItem, r.ResponseFunctionToolCall, set()),
    (wr.FunctionCallOutputItem, FunctionCallOutput, set()),
    (wr.ReasoningItem, r.ResponseReasoningItem, set()),
    (wr.CompactionItem, r.ResponseCompactionItem, set()),
    (wr.ResponsesUsage, r.ResponseUsage, set()),
]


def _keys(shape: Any) -> set[str]:
    """The keys of a TypedDict, or the fields of a pydantic model."""
    if hasattr(shape, "model_fields"):
        return set(shape.model_fields)
    return set(shape.__required_keys__ | shape.__optional_keys__)


def _type_literals(shape: Any) -> set[str] | None:
    """The values a shape's ``type`` may take (None: it has no literal ``type``)."""
    if hasattr(shape, "model_fields"):
        field = shape.model_fields.get("type")
        hint = field.annotation if field is not None else None
    else:
        hint = typing.get_type_hints(shape).get("type")
    while get_origin(hint) in (typing.Required, typing.NotRequired):
        hint = get_args(hint)[0]
    if get_origin(hint) is not Literal:
        return None
    return {str(value) for value in get_args(hint)}


def _name(pair: tuple[Any, Any, set[str]]) -> str:
    return f"{pair[0].__module__.rsplit('.', 1)[-1]}.{pair[0].__name__}~{pair[1].__name__}"


@pytest.mark.parametrize(("ours", "sdk", "extensions"), PAIRS, ids=[_name(p) for p in PAIRS])
def test_every_key_is_the_sdks_or_a_named_extension(
    ours: Any, sdk: Any, extensions: set[str]
) -> None:
    unknown = _keys(ours) - _keys(sdk) - extensions
    assert not unknown, f"{ours.__name__} has keys the SDK's {sdk.__name__} does not: {unknown}"


@pytest.mark.parametrize(("ours", "sdk", "extensions"), PAIRS, ids=[_name(p) for p in PAIRS])
def test_type_literals_are_the_sdks(ours: Any, sdk: Any, extensions: set[str]) -> None:
    mine, theirs = _type_literals(ours), _type_literals(sdk)
    if mine is not None and theirs is not None:
        assert mine <= theirs, f"{ours.__name__}.type {mine} is not the SDK's {theirs}"


def test_responses_event_fields_are_the_sdks_events() -> None:
    """Every field a Responses stream event may carry is one some SDK event type has."""
    (events,) = [arg for arg in get_args(r.ResponseStreamEvent) if get_origin(arg) is not None]
    known = set().union(*(set(event.model_fields) for event in get_args(events)))
    assert _keys(wr.ResponsesEvent) - known == set()


def test_every_wire_typeddict_is_checked() -> None:
    """A shape added to app/wire gets its SDK counterpart here (or says why it has none)."""
    without_counterpart = {
        # contextgate's own: the chat form's provider blocks and event union
        "NativeBlock",
        "NamedFunction",
        "NamedToolChoice",
        "CacheCreation",
        "MessageDeltaBody",
        "PingEvent",
        "ResponseError",
        "EventFields",  # checked with ResponsesEvent below
        "ResponsesEvent",
    }
    checked = {pair[0].__name__ for pair in PAIRS}
    for module in (wa, wc, wr, ws):
        for name, value in vars(module).items():
            if typing.is_typeddict(value) and value.__module__ == module.__name__:
                assert name in checked | without_counterpart, f"{name} has no SDK pair here"
