"""Responses ⇄ chat: the request's items become one internal chat turn (the answer's way
back is output.py; tools are tools.py).

Round trips are exact where a provider checks them: an assistant message rebuilt from output
items hashes like the one stored (so full-history clients continue the same conversation), and
thinking blocks travel inside the reasoning item's ``encrypted_content`` and come back
byte-for-byte.
"""

from __future__ import annotations

from typing import TypedDict, cast

import orjson

from app.core.errors import BadRequest
from app.protocol.chat import AttachmentRef, ContextOptions
from app.responses.output import (
    decode_reasoning,
    encode_reasoning,
    item_id,
    output_items,
    response_usage,
)
from app.responses.schemas import (
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    ResponsesRequest,
)
from app.responses.tools import chat_tool, chat_tool_choice, function_tools
from app.wire.chat import (
    ChatMessage,
    ChatTool,
    FileData,
    FilePart,
    ImagePart,
    ImageURL,
    NamedToolChoice,
    NativeBlock,
    TextPart,
    ThinkingBlockParam,
    ToolCall,
)
from app.wire.chat import ContentPart as ChatPart
from app.wire.json import JSONObject
from app.wire.responses import InputTextPart, OutputTextPart

__all__ = [
    "ChatParams",
    "chat_messages",
    "chat_params",
    "input_items",
    # the answer's side, where the door's callers and tests have always found it
    "decode_reasoning",
    "encode_reasoning",
    "item_id",
    "output_items",
    "response_usage",
]


class ChatParams(TypedDict, total=False):
    """The chat request's fields besides model and messages, as a Responses request sets them."""

    stream: bool
    user: str
    max_tokens: int
    temperature: float
    top_p: float
    parallel_tool_calls: bool
    conversation_id: str
    attachments: list[AttachmentRef]
    context: ContextOptions
    tools: list[ChatTool]
    tool_choice: str | NamedToolChoice
    reasoning_effort: str
    response_format: JSONObject
    stream_options: JSONObject


# ---- request: items → chat messages --------------------------------------------------------


def _chat_part(part: ContentPart, where: str) -> ChatPart:
    if part.type in ("input_text", "output_text", "text"):
        text: TextPart = {"type": "text", "text": part.text or ""}
        return text
    if part.type == "refusal":
        return {"type": "text", "text": part.refusal or ""}
    if part.type == "input_image":
        if not part.image_url:
            raise BadRequest(
                "An input_image part needs 'image_url' (file ids are not supported).",
                param=where,
                code="unsupported_content",
            )
        image: ImageURL = {"url": part.image_url}
        if part.detail:
            image["detail"] = part.detail
        image_part: ImagePart = {"type": "image_url", "image_url": image}
        return image_part
    file: FileData = {}
    if part.file_data:
        file["file_data"] = part.file_data
    if part.file_id:
        file["file_id"] = part.file_id
    if part.filename:
        file["filename"] = part.filename
    file_part: FilePart = {"type": "file", "file": file}
    return file_part


def _chat_content(content: str | list[ContentPart], where: str) -> str | list[ChatPart]:
    """A string stays a string; text-only parts become one string; others stay parts."""
    if isinstance(content, str):
        return content
    parts = [_chat_part(part, f"{where}.{i}") for i, part in enumerate(content)]
    texts = [part["text"] for part in parts if part["type"] == "text"]
    if len(texts) == len(parts):
        return "".join(texts)
    return parts


class _Assistant:
    """Consecutive assistant items (reasoning, message, function calls) become one message."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.text: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.reasoning: list[str] = []
        self.thinking_blocks: list[ThinkingBlockParam] = []

    def flush(self, messages: list[ChatMessage]) -> None:
        if not self.text and not self.tool_calls:
            self.reset()  # reasoning alone carries no turn
            return
        message: ChatMessage = {"role": "assistant", "content": "".join(self.text) or None}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.reasoning:
            message["reasoning_content"] = "\n\n".join(self.reasoning)
        if self.thinking_blocks:
            message["thinking_blocks"] = self.thinking_blocks
        messages.append(message)
        self.reset()


def _reasoning_blocks(item: ReasoningItem) -> list[ThinkingBlockParam]:
    """Thinking blocks contextgate put in the item; the provider's own encrypted reasoning
    (native path) kept whole as a native block."""
    blocks = decode_reasoning(item.encrypted_content)
    if blocks is None and item.encrypted_content:
        return [NativeBlock(type="openai_item", item=item.model_dump(exclude_none=True))]
    return blocks or []


def chat_messages(request: ResponsesRequest) -> list[ChatMessage]:
    """The request's instructions and input as chat messages, in order."""
    messages: list[ChatMessage] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    if isinstance(request.input, str):
        messages.append({"role": "user", "content": request.input})
        return messages
    pending = _Assistant()
    for index, item in enumerate(request.input):
        where = f"input.{index}"
        if isinstance(item, MessageItem) and item.role == "assistant":
            text = _chat_content(item.content, f"{where}.content")
            pending.text.append(text if isinstance(text, str) else orjson.dumps(text).decode())
        elif isinstance(item, FunctionCallItem):
            pending.tool_calls.append(
                {
                    "id": item.call_id,
                    "type": "function",
                    "function": {"name": item.name, "arguments": item.arguments},
                }
            )
        elif isinstance(item, ReasoningItem):
            summary = "".join(part.text for part in item.summary)
            if summary:
                pending.reasoning.append(summary)
            pending.thinking_blocks.extend(_reasoning_blocks(item))
        elif isinstance(item, FunctionCallOutputItem):
            pending.flush(messages)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.call_id,
                    "content": _chat_content(item.output, f"{where}.output"),
                }
            )
        else:
            assert isinstance(item, MessageItem)
            pending.flush(messages)
            messages.append(
                {"role": item.role, "content": _chat_content(item.content, f"{where}.content")}
            )
    pending.flush(messages)
    return messages


def _response_format(text: JSONObject | None) -> JSONObject | None:
    fmt = (text or {}).get("format")
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    raise BadRequest(
        f"Unsupported text.format type {fmt.get('type')!r}.",
        param="text.format",
        code="unsupported_format",
    )


def chat_params(request: ResponsesRequest, *, native: bool = False) -> ChatParams:
    """The chat request's fields besides model and messages (extensions included). ``native``:
    the turn goes to OpenAI's own Responses API, which takes a hosted tool's ``tool_choice``
    as it is (left out of the chat form here, not refused)."""
    params: dict[str, object] = {
        "stream": request.stream,
        "user": request.user,
        "max_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "parallel_tool_calls": request.parallel_tool_calls,
        "conversation_id": request.conversation_id,
        "attachments": request.attachments,
        "context": request.context,
    }
    tools = function_tools(request.tools)
    if tools:
        params["tools"] = [chat_tool(tool) for tool in tools]
    choice_type = request.tool_choice.get("type") if isinstance(request.tool_choice, dict) else None
    hosted_choice = native and choice_type not in (None, "function", "auto", "none", "required")
    if request.tool_choice is not None and not hosted_choice:
        choice = chat_tool_choice(request.tool_choice)
        if tools:  # chat APIs refuse a tool_choice (or parallel_tool_calls) without tools
            params["tool_choice"] = choice
    if not tools:
        params.pop("parallel_tool_calls", None)
    effort = (request.reasoning or {}).get("effort")
    if effort:
        params["reasoning_effort"] = effort
    response_format = _response_format(request.text)
    if response_format is not None:
        params["response_format"] = response_format
    if request.stream:
        params["stream_options"] = {"include_usage": True}
    return cast(ChatParams, {key: value for key, value in params.items() if value is not None})


def _item_part(part: ContentPart | str, role: str) -> InputTextPart | OutputTextPart | JSONObject:
    if isinstance(part, str):
        if role == "assistant":
            return OutputTextPart(type="output_text", text=part, annotations=[])
        return InputTextPart(type="input_text", text=part)
    return part.model_dump(exclude_none=True)


def input_items(request: ResponsesRequest) -> list[JSONObject]:
    """The input as OpenAI lists it back (``input_items``): every item with an id."""
    if isinstance(request.input, str):
        items: list[JSONObject] = [
            {"type": "message", "role": "user", "content": [_item_part(request.input, "user")]}
        ]
    else:
        items = []
        for item in request.input:
            data = item.model_dump(exclude_none=True)
            if isinstance(item, MessageItem):
                content = item.content if isinstance(item.content, list) else [item.content]
                data["content"] = [_item_part(part, item.role) for part in content]
            items.append(data)
    prefixes = {"message": "msg", "function_call": "fc", "reasoning": "rs", "compaction": "cmp"}
    for data in items:
        data.setdefault("id", item_id(prefixes.get(data["type"], "fco")))
        if data["type"] != "reasoning":
            data.setdefault("status", "completed")
    return items
