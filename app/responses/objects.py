"""The Response object as OpenAI returns it, plus contextgate's extra fields."""

from __future__ import annotations

from typing import Any, Literal

from app.responses.schemas import ResponsesRequest

__all__ = ["ResponseStatus", "echo_fields", "incomplete_reason", "response_object"]

ResponseStatus = Literal["in_progress", "completed", "incomplete", "failed"]


def echo_fields(request: ResponsesRequest) -> dict[str, Any]:
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


def response_object(
    *,
    response_id: str,
    created_at: int,
    echo: dict[str, Any],
    status: ResponseStatus,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    conversation_id: str | None,
    context_utilization: dict[str, Any] | None,
    incomplete: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        **echo,
        "output": output,
        "usage": usage,
        "conversation_id": conversation_id,
        "context_utilization": context_utilization,
    }
