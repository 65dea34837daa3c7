"""Responses ⇄ chat: the request's items become one internal chat turn; the chat answer
becomes Responses output items.

Round trips are exact where a provider checks them: an assistant message rebuilt from output
items hashes like the one stored (so full-history clients continue the same conversation), and
thinking blocks travel inside the reasoning item's ``encrypted_content`` and come back
byte-for-byte.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Any

import orjson
from pydantic import ValidationError

from app.core.errors import BadRequest
from app.llm.responses import Usage
from app.llm.responses_items import NATIVE_BLOCK
from app.responses.schemas import (
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    MessageItem,
    ReasoningItem,
    ResponsesRequest,
)

__all__ = [
    "chat_messages",
    "chat_params",
    "decode_reasoning",
    "encode_reasoning",
    "function_tools",
    "input_items",
    "item_id",
    "output_items",
    "response_usage",
]

_REASONING_PREFIX = "cg1:"


def item_id(prefix: str) -> str:
    """Ids of output items and responses: ``msg_…``, ``fc_…``, ``rs_…``, ``resp_…``."""
    return f"{prefix}_{secrets.token_hex(16)}"


# ---- reasoning: thinking blocks ride in encrypted_content -------------------------------


def encode_reasoning(thinking_blocks: list[dict[str, Any]]) -> str:
    payload = orjson.dumps({"thinking_blocks": thinking_blocks})
    return _REASONING_PREFIX + base64.urlsafe_b64encode(payload).decode()


def decode_reasoning(encrypted: str | None) -> list[dict[str, Any]] | None:
    """The thinking blocks of a reasoning item contextgate produced; None for anyone else's."""
    if not encrypted or not encrypted.startswith(_REASONING_PREFIX):
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(encrypted[len(_REASONING_PREFIX) :]))
    except (binascii.Error, ValueError):
        return None
    blocks = data.get("thinking_blocks") if isinstance(data, dict) else None
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        return None
    return blocks


# ---- request: items → chat messages --------------------------------------------------------


def _chat_part(part: ContentPart, where: str) -> dict[str, Any]:
    if part.type in ("input_text", "output_text", "text"):
        return {"type": "text", "text": part.text or ""}
    if part.type == "refusal":
        return {"type": "text", "text": part.refusal or ""}
    if part.type == "input_image":
        if not part.image_url:
            raise BadRequest(
                "An input_image part needs 'image_url' (file ids are not supported).",
                param=where,
                code="unsupported_content",
            )
        image: dict[str, Any] = {"url": part.image_url}
        if part.detail:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    file = {
        key: value
        for key, value in (
            ("file_data", part.file_data),
            ("file_id", part.file_id),
            ("filename", part.filename),
        )
        if value
    }
    return {"type": "file", "file": file}


def _chat_content(content: str | list[ContentPart], where: str) -> str | list[dict[str, Any]]:
    """A string stays a string; text-only parts become one string; others stay parts."""
    if isinstance(content, str):
        return content
    parts = [_chat_part(part, f"{where}.{i}") for i, part in enumerate(content)]
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)
    return parts


class _Assistant:
    """Consecutive assistant items (reasoning, message, function calls) become one message."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.text: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.reasoning: list[str] = []
        self.thinking_blocks: list[dict[str, Any]] = []

    def flush(self, messages: list[dict[str, Any]]) -> None:
        if not self.text and not self.tool_calls:
            self.reset()  # reasoning alone carries no turn
            return
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.reasoning:
            message["reasoning_content"] = "\n\n".join(self.reasoning)
        if self.thinking_blocks:
            message["thinking_blocks"] = self.thinking_blocks
        messages.append(message)
        self.reset()


def chat_messages(request: ResponsesRequest) -> list[dict[str, Any]]:
    """The request's instructions and input as chat messages, in order."""
    messages: list[dict[str, Any]] = []
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
            blocks = decode_reasoning(item.encrypted_content)
            if blocks is None and item.encrypted_content:  # the provider's own (native path)
                blocks = [{"type": NATIVE_BLOCK, "item": item.model_dump(exclude_none=True)}]
            pending.thinking_blocks.extend(blocks or [])
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


def function_tools(tools: list[dict[str, Any]] | None) -> list[FunctionTool]:
    """The function tools of a request, namespaces flattened; hosted tools left out."""
    found: list[FunctionTool] = []
    for index, tool in enumerate(tools or ()):
        kind = tool.get("type")
        if kind == "function":
            try:
                found.append(FunctionTool.model_validate(tool))
            except ValidationError as error:
                raise BadRequest(
                    f"Invalid function tool: {error.errors()[0].get('msg')}",
                    param=f"tools.{index}",
                    code="invalid_tool",
                ) from None
        elif kind == "namespace":
            found += function_tools(list(tool.get("tools") or ()))
        elif not isinstance(kind, str):
            raise BadRequest("Every tool needs a 'type'.", param=f"tools.{index}")
    return found


def _chat_tool(tool: FunctionTool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    function["parameters"] = tool.parameters or {"type": "object", "properties": {}}
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


def _chat_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    if choice.get("type") in ("auto", "none", "required"):
        return str(choice["type"])
    raise BadRequest(
        "tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'name': …}.",
        param="tool_choice",
        code="unsupported_tool_choice",
    )


def _response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
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


def chat_params(request: ResponsesRequest, *, native: bool = False) -> dict[str, Any]:
    """The chat request's fields besides model and messages (extensions included). ``native``:
    the turn goes to OpenAI's own Responses API, which takes a hosted tool's ``tool_choice``
    as it is (left out of the chat form here, not refused)."""
    params: dict[str, Any] = {
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
        params["tools"] = [_chat_tool(tool) for tool in tools]
    choice_type = request.tool_choice.get("type") if isinstance(request.tool_choice, dict) else None
    hosted_choice = native and choice_type not in (None, "function", "auto", "none", "required")
    if request.tool_choice is not None and not hosted_choice:
        choice = _chat_tool_choice(request.tool_choice)
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
    return {key: value for key, value in params.items() if value is not None}


def _item_part(part: ContentPart | str, role: str) -> dict[str, Any]:
    if isinstance(part, str):
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": kind, "text": part, **({"annotations": []} if role == "assistant" else {})}
    return part.model_dump(exclude_none=True)


def input_items(request: ResponsesRequest) -> list[dict[str, Any]]:
    """The input as OpenAI lists it back (``input_items``): every item with an id."""
    if isinstance(request.input, str):
        items: list[dict[str, Any]] = [
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


# ---- answer: chat message → output items ---------------------------------------------------


def reasoning_item(
    item: str, reasoning: str | None, thinking_blocks: list[dict[str, Any]] | None
) -> dict[str, Any]:
    text = reasoning or "".join(str(b.get("thinking") or "") for b in thinking_blocks or ())
    data: dict[str, Any] = {
        "id": item,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
    }
    if thinking_blocks:
        data["encrypted_content"] = encode_reasoning(thinking_blocks)
    return data


def message_item(item: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": item,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call_item(
    item: str, call: dict[str, Any], status: str = "completed"
) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "id": item,
        "type": "function_call",
        "status": status,
        "call_id": str(call.get("id") or item),
        "name": str(function.get("name") or ""),
        "arguments": str(function.get("arguments") or ""),
    }


def output_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    """An assistant chat message as output items: reasoning, message, function calls."""
    items: list[dict[str, Any]] = []
    if message.get("reasoning_content") or message.get("thinking_blocks"):
        items.append(
            reasoning_item(
                item_id("rs"), message.get("reasoning_content"), message.get("thinking_blocks")
            )
        )
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    if content:
        items.append(message_item(item_id("msg"), content))
    for call in message.get("tool_calls") or ():
        items.append(function_call_item(item_id("fc"), call))
    return items


def response_usage(usage: Usage | None) -> dict[str, Any]:
    raw = usage.raw if usage else {}
    prompt = usage.prompt_tokens if usage else 0
    completion = usage.completion_tokens if usage else 0
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": int(prompt_details.get("cached_tokens") or 0),
            "cache_write_tokens": int(
                prompt_details.get("cache_creation_tokens")
                or raw.get("cache_creation_input_tokens")
                or 0
            ),
        },
        "output_tokens": completion,
        "output_tokens_details": {
            "reasoning_tokens": int(completion_details.get("reasoning_tokens") or 0)
        },
        "total_tokens": prompt + completion,
    }
