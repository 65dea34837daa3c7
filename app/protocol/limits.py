"""The shape of a chat request: message, attachment and tool counts, message and attachment
sizes; a clear 400/413 before anything is counted or stored. (The body size:
app/core/limits.py; integers past 64 bits, NUL and lone surrogates in any JSON body, refused
before it is parsed: app/core/textcheck.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.core.errors import BadRequest, PayloadTooLarge

if TYPE_CHECKING:
    from app.core.settings import Settings
    from app.protocol.chat import ChatCompletionRequest

__all__ = ["check_chat_limits", "check_message_sizes"]


def _field(item: object, name: str) -> Any:  # a model's attribute or a dict's key
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _message_chars(message: object) -> int:
    content = _field(message, "content")
    size = len(content) if isinstance(content, str) else 0
    if isinstance(content, list):
        for part in content:
            text = _field(part, "text")
            size += len(text) if isinstance(text, str) else 0
    for call in _field(message, "tool_calls") or []:
        arguments = _field(_field(call, "function"), "arguments")
        size += len(arguments) if isinstance(arguments, str) else 0
    return size


def check_message_sizes(settings: Settings, messages: Sequence[object]) -> None:
    """One message's text is capped (CONTEXTGATE_MAX_MESSAGE_CHARS): 413 before any counting.
    ``messages``: a request's messages, as models or in chat form (dicts)."""
    limit = settings.max_message_chars
    for index, message in enumerate(messages):
        size = _message_chars(message)
        if size > limit:
            raise PayloadTooLarge(
                f"Message {index} has {size} characters (the limit is {limit}, "
                "CONTEXTGATE_MAX_MESSAGE_CHARS).",
                param=f"messages.{index}.content",
                code="message_too_large",
            )


def check_chat_limits(settings: Settings, request: ChatCompletionRequest) -> None:
    """Counts and sizes a chat request may have; a clear 400/413 before anything is stored."""
    check_message_sizes(settings, request.messages)
    if len(request.messages) > settings.max_messages:
        raise BadRequest(
            f"Too many messages: {len(request.messages)} (the limit is {settings.max_messages}, "
            "CONTEXTGATE_MAX_MESSAGES).",
            param="messages",
            code="too_many_messages",
        )
    if len(request.attachments) > settings.max_attachments:
        raise BadRequest(
            f"Too many attachments: {len(request.attachments)} (the limit is "
            f"{settings.max_attachments}, CONTEXTGATE_MAX_ATTACHMENTS).",
            param="attachments",
            code="too_many_attachments",
        )
    for index, attachment in enumerate(request.attachments):
        size = len(attachment.content or "")
        if size > settings.max_attachment_chars:
            raise PayloadTooLarge(
                f"Attachment {index} has {size} characters (the limit is "
                f"{settings.max_attachment_chars}, CONTEXTGATE_MAX_ATTACHMENT_CHARS).",
                param=f"attachments.{index}.content",
                code="attachment_too_large",
            )
    tools = request.tools or []
    if len(tools) > settings.max_tools:
        raise BadRequest(
            f"Too many tools: {len(tools)} (the limit is {settings.max_tools}, "
            "CONTEXTGATE_MAX_TOOLS).",
            param="tools",
            code="too_many_tools",
        )
