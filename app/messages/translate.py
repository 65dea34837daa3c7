"""Anthropic Messages → the internal turn (chat form), as plain functions (the answer's way
back is answer.py).

Request: ``system`` becomes a system message; each Anthropic message becomes one or more chat
messages in order (a user message's ``tool_result`` blocks become ``tool`` messages first, its
other blocks one user message after them); ``tool_use`` blocks become ``tool_calls``;
``thinking`` / ``redacted_thinking`` blocks become the assistant message's ``thinking_blocks``
exactly as sent (litellm resends them to Anthropic from there) and their text its
``reasoning_content``. ``cache_control`` stays on the content part, tool or tool call where the
client put it (a tool_result's goes on its last content part, where litellm reads it).
"""

from __future__ import annotations

from typing import TypeVar

import orjson
from pydantic import ValidationError

from app.core.errors import BadRequest
from app.core.validation import validation_message
from app.messages.answer import anthropic_content, anthropic_usage, stop_reason
from app.messages.plain import assistant_chat
from app.messages.schemas import (
    CountTokensRequest,
    DocumentBlock,
    ImageBlock,
    MessageParam,
    MessagesRequest,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolChoice,
    ToolResultBlock,
    ToolUseBlock,
)
from app.messages.schemas import Tool as AnthropicTool
from app.protocol.chat import ChatCompletionRequest
from app.wire.anthropic import CacheControl
from app.wire.chat import (
    AssistantContent,
    ChatMessage,
    ChatTool,
    ContentPart,
    FilePart,
    FunctionDefinition,
    ImagePart,
    TextPart,
    ThinkingBlockParam,
    ToolCall,
)
from app.wire.chat import ToolChoice as ChatToolChoice

__all__ = [
    "chat_messages",
    "chat_tools",
    "to_turn_request",
    # the answer's side, where the door's tests have always found it
    "anthropic_content",
    "anthropic_usage",
    "stop_reason",
]


# ---- request ---------------------------------------------------------------------------


_Cacheable = TypeVar("_Cacheable", TextPart, ImagePart, FilePart, ToolCall)


def _with_cache_control(
    part: _Cacheable, block: TextBlock | ImageBlock | DocumentBlock | ToolUseBlock
) -> _Cacheable:
    if block.cache_control is not None:
        part["cache_control"] = block.cache_control
    return part


def _text_part(block: TextBlock) -> TextPart:
    part: TextPart = {"type": "text", "text": block.text}
    return _with_cache_control(part, block)


def _image_part(block: ImageBlock) -> ImagePart:
    source = block.source
    if source["type"] == "base64":
        url = f"data:{source['media_type']};base64,{source['data']}"
    else:
        url = source["url"]
    part: ImagePart = {"type": "image_url", "image_url": {"url": url}}
    return _with_cache_control(part, block)


def _document_part(block: DocumentBlock) -> TextPart | FilePart:
    source = block.source
    if source["type"] == "text":
        text: TextPart = {"type": "text", "text": source["data"]}
        return _with_cache_control(text, block)
    file: FilePart
    if source["type"] == "base64":
        media = source.get("media_type") or "application/pdf"
        file = {"type": "file", "file": {"file_data": f"data:{media};base64,{source['data']}"}}
    else:
        file = {"type": "file", "file": {"file_id": source["url"]}}
    return _with_cache_control(file, block)


def _content_part(block: TextBlock | ImageBlock | DocumentBlock) -> ContentPart:
    if isinstance(block, TextBlock):
        return _text_part(block)
    if isinstance(block, ImageBlock):
        return _image_part(block)
    return _document_part(block)


def _marked(part: ContentPart, cache_control: CacheControl) -> ContentPart:
    """A copy of the part with the client's ``cache_control`` (where litellm reads it)."""
    marked = part.copy()
    marked["cache_control"] = cache_control
    return marked


def _tool_message(block: ToolResultBlock) -> ChatMessage:
    content: str | list[ContentPart]
    if block.content is None or isinstance(block.content, str):
        content = block.content or ""
        if block.cache_control is not None:
            content = [{"type": "text", "text": content}]
    else:
        content = [_content_part(part) for part in block.content]
        if not content:
            content = [{"type": "text", "text": ""}] if block.cache_control is not None else ""
    if block.cache_control is not None and isinstance(content, list):
        content[-1] = _marked(content[-1], block.cache_control)
    message: ChatMessage = {
        "role": "tool",
        "tool_call_id": block.tool_use_id,
        "content": content,
    }
    if block.is_error:
        message["is_error"] = True
    return message


def _user_messages(message: MessageParam) -> list[ChatMessage]:
    if isinstance(message.content, str):
        return [{"role": "user", "content": message.content}]
    tools: list[ChatMessage] = []
    parts: list[ContentPart] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            tools.append(_tool_message(block))
        elif isinstance(block, TextBlock | ImageBlock | DocumentBlock):
            parts.append(_content_part(block))
    return tools + ([{"role": "user", "content": parts}] if parts else [])


def _arguments(block: ToolUseBlock) -> str:
    return orjson.dumps(block.input).decode()


def _assistant_message(message: MessageParam) -> ChatMessage:
    if isinstance(message.content, str):
        return {"role": "assistant", "content": message.content}
    parts: list[TextPart] = []
    calls: list[ToolCall] = []
    thinking: list[ThinkingBlockParam] = []
    reasoning: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(_text_part(block))
        elif isinstance(block, ToolUseBlock):
            call: ToolCall = {
                "id": block.id,
                "type": "function",
                "function": {"name": block.name, "arguments": _arguments(block)},
            }
            calls.append(_with_cache_control(call, block))
        elif isinstance(block, ThinkingBlock):
            reasoning.append(block.thinking)
            if block.signature:  # unsigned thinking (another provider's reasoning) is text only
                thinking.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
        elif isinstance(block, RedactedThinkingBlock):
            thinking.append({"type": "redacted_thinking", "data": block.data})
    return assistant_chat(_assistant_content(parts), calls, thinking, reasoning)


def _assistant_content(parts: list[TextPart]) -> AssistantContent:
    """Plain text as a string (as answers are stored); parts when one carries cache_control."""
    if not parts:
        return None
    if any("cache_control" in part for part in parts):
        return [*parts]
    return "".join(part["text"] for part in parts)


def _system_messages(system: str | list[TextBlock] | None) -> list[ChatMessage]:
    if system is None or system == [] or system == "":
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    parts: list[ContentPart] = [_text_part(block) for block in system]
    return [{"role": "system", "content": parts}]


def chat_messages(body: MessagesRequest | CountTokensRequest) -> list[ChatMessage]:
    """The request's system prompt and messages in chat form, in order."""
    messages = _system_messages(body.system)
    for message in body.messages:
        if message.role == "user":
            messages.extend(_user_messages(message))
        else:
            messages.append(_assistant_message(message))
    return messages


def _tool(tool: AnthropicTool) -> ChatTool:
    function: FunctionDefinition = {"name": tool.name, "parameters": tool.input_schema}
    if tool.description is not None:
        function["description"] = tool.description
    chat: ChatTool = {"type": "function", "function": function}
    if tool.cache_control is not None:
        chat["cache_control"] = tool.cache_control
    return chat


_CHOICES: dict[str, ChatToolChoice] = {"auto": "auto", "any": "required", "none": "none"}


def _tool_choice(choice: ToolChoice) -> ChatToolChoice:
    if choice.type == "tool":
        return {"type": "function", "function": {"name": str(choice.name)}}
    return _CHOICES[choice.type]


def chat_tools(body: MessagesRequest | CountTokensRequest) -> list[ChatTool] | None:
    return [_tool(tool) for tool in body.tools] if body.tools else None


def to_turn_request(
    body: MessagesRequest, messages: list[ChatMessage] | None = None
) -> ChatCompletionRequest:
    """The internal turn for this Anthropic request (validated like a chat request).
    ``messages``: the request's messages already in chat form, in shapes ``plain_messages``
    vouches for (app/messages/plain.py), in place of ``body.messages``."""
    chat = chat_messages(body) if messages is None else [*_system_messages(body.system), *messages]
    fields: dict[str, object] = {
        "model": body.model,
        "stream": body.stream,
        "max_tokens": body.max_tokens,
        "conversation_id": body.conversation_id,
        "attachments": body.attachments,
        "context": body.context,
    }
    tools = chat_tools(body)
    if tools:
        fields["tools"] = tools
    if body.tool_choice is not None:
        fields["tool_choice"] = _tool_choice(body.tool_choice)
        if body.tool_choice.disable_parallel_tool_use:
            fields["parallel_tool_calls"] = False
    if body.stop_sequences:
        fields["stop"] = body.stop_sequences
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(body, name)
        if value is not None:
            fields[name] = value
    if body.thinking is not None:
        fields["thinking"] = body.thinking.model_dump(exclude_none=True)
    if body.metadata is not None and body.metadata.user_id:
        fields["user"] = body.metadata.user_id
    if body.stream:
        fields["stream_options"] = {"include_usage": True}
    try:
        return ChatCompletionRequest.of_chat_form(fields, chat)
    except ValidationError as error:  # what the schema let through and a chat turn cannot be
        message, param = validation_message(error.errors())
        raise BadRequest(message, param=param, code="invalid_request") from None
