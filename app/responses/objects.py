"""The Response object as OpenAI returns it, plus contextgate's extra fields."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NotRequired, TypedDict, Unpack

from app.responses.schemas import ResponsesRequest
from app.wire.json import JSONObject
from app.wire.responses import ResponseError, ResponseOutput, ResponsesUsage

__all__ = [
    "ResponseFields",
    "ResponseStatus",
    "echo_fields",
    "incomplete_reason",
    "response_object",
]

ResponseStatus = Literal["in_progress", "completed", "incomplete", "failed"]


class ResponseFields(TypedDict):
    """What a Response is made of: its state, its output and contextgate's report."""

    response_id: str
    created_at: int
    echo: JSONObject  # what it repeats of its request (echo_fields)
    status: ResponseStatus
    output: Sequence[ResponseOutput]
    usage: ResponsesUsage | JSONObject | None  # JSONObject: as stored
    conversation_id: str | None
    context_utilization: JSONObject | None
    incomplete: NotRequired[str | None]
    error: NotRequired[ResponseError | None]


def echo_fields(request: ResponsesRequest) -> JSONObject:
    """What a Response repeats of its request (stored with it, for GET)."""
    tools = [dict(tool) for tool in request.tools or ()]
    for tool in tools:
        if tool.get("type") == "function":
            tool.setdefault("strict", None)
            tool.setdefault("parameters", None)
    return {
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "model": request.model,
        "parallel_tool_calls": (
            True if request.parallel_tool_calls is None else request.parallel_tool_calls
        ),
        "previous_response_id": request.previous_response_id,
        "reasoning": {
            "effort": (request.reasoning or {}).get("effort"),
            "summary": (request.reasoning or {}).get("summary"),
        },
        "store": request.store,
        "temperature": request.temperature,
        "text": request.text or {"format": {"type": "text"}},
        "tool_choice": request.tool_choice or "auto",
        "tools": tools,
        "top_p": request.top_p,
        "truncation": request.truncation or "disabled",
        "user": request.user,
        "metadata": request.metadata or {},
        # OpenAI's: the conversation the request named (``conversation``), else null.
        "conversation": {"id": ref} if (ref := request.conversation_ref()) else None,
    }


def incomplete_reason(finish_reason: str | None) -> str | None:
    if finish_reason == "length":
        return "max_output_tokens"
    if finish_reason == "content_filter":
        return "content_filter"
    return None


def response_object(**fields: Unpack[ResponseFields]) -> JSONObject:
    """The Response object: OpenAI's fields, the request's echo, then contextgate's."""
    incomplete = fields.get("incomplete")
    return {
        "id": fields["response_id"],
        "object": "response",
        "created_at": fields["created_at"],
        "status": fields["status"],
        "error": fields.get("error"),
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        **fields["echo"],
        "output": fields["output"],
        "usage": fields["usage"],
        "conversation_id": fields["conversation_id"],
        "context_utilization": fields["context_utilization"],
    }
