"""Chat form ⇄ OpenAI Responses items, for the native Responses path (native_responses.py).

The conversation is stored in the chat form every door shares. What only the Responses API
has (reasoning items with ``encrypted_content``, hosted tool calls such as
``web_search_call``) is stored verbatim in the assistant message's ``thinking_blocks``, one
``{"type": "openai_item", "item": …}`` block per item, and sent back as it came: the provider
verifies its encrypted reasoning byte for byte. The chat form never sends these blocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard, cast

from app.wire.chat import (
    ChatMessage,
    ChatUsage,
    ContentPart,
    MessageContent,
    NativeBlock,
    ThinkingBlockParam,
    ToolCall,
)
from app.wire.json import JSONObject
from app.wire.responses import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputContentPart,
    InputFilePart,
    InputImagePart,
    InputItem,
    MessageItem,
)
from app.wire.stream import ChatChunk, Delta, ToolCallDelta

__all__ = [
    "NATIVE_BLOCK",
    "input_part",
    "chat_answer",
    "chat_usage",
    "event_chunk",
    "has_native_blocks",
    "input_items",
    "native_items",
    "without_native_blocks",
]

NATIVE_BLOCK = "openai_item"
_ANSWER_ITEMS = ("message", "function_call")
NativeInput = InputItem | JSONObject  # what we build, and the provider's items sent back


# ---- stored blocks ----------------------------------------------------------------------


def is_native(block: ThinkingBlockParam) -> TypeGuard[NativeBlock]:
    """A thinking block that keeps a Responses item."""
    fields: Mapping[str, object] = block
    return fields.get("type") == NATIVE_BLOCK and isinstance(fields.get("item"), dict)


def native_items(blocks: Sequence[ThinkingBlockParam] | None) -> list[JSONObject]:
    """The Responses items a message's thinking blocks keep, in order."""
    return [block["item"] for block in blocks or () if is_native(block)]


def has_native_blocks(messages: Sequence[ChatMessage]) -> bool:
    return any(native_items(message.get("thinking_blocks")) for message in messages)


def without_native_blocks(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The messages for a chat-form call: Responses items are not for it."""
    out = []
    for message in messages:
        blocks = message.get("thinking_blocks")
        if blocks and native_items(blocks):
            kept = [block for block in blocks if block.get("type") != NATIVE_BLOCK]
            message = message.copy()
            del message["thinking_blocks"]
            if kept:
                message["thinking_blocks"] = kept
        out.append(message)
    return out


# ---- request: chat messages → input items -----------------------------------------------


def _text(content: object) -> str:
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return "" if content is None else str(content)


def input_part(part: ContentPart | object) -> InputContentPart:
    """A chat content part as a Responses input part (anything but a part: its text)."""
    if not isinstance(part, dict):
        return {"type": "input_text", "text": str(part)}
    fields: Mapping[str, Any] = part
    kind = fields.get("type")
    if kind == "image_url":
        image = fields.get("image_url") or {}
        url = image.get("url") if isinstance(image, dict) else image
        out: InputImagePart = {"type": "input_image", "image_url": url}
        if isinstance(image, dict) and image.get("detail"):
            out["detail"] = image["detail"]
        return out
    if kind == "file":
        return cast(InputFilePart, {"type": "input_file", **(fields.get("file") or {})})
    return {"type": "input_text", "text": str(fields.get("text") or "")}


def _input_content(content: MessageContent | None) -> str | list[InputContentPart]:
    if isinstance(content, list):
        if all(isinstance(p, dict) and p.get("type") == "text" for p in content):
            return _text(content)
        return [input_part(part) for part in content if isinstance(part, dict)]
    return "" if content is None else str(content)


def _assistant_items(message: ChatMessage) -> list[NativeInput]:
    items: list[NativeInput] = list(native_items(message.get("thinking_blocks")))
    text = _text(message.get("content"))
    if text:
        items.append(MessageItem(type="message", role="assistant", content=text))
    for call in message.get("tool_calls") or ():
        function: Mapping[str, object] = call.get("function") or {}
        items.append(
            FunctionCallItem(
                type="function_call",
                call_id=str(call.get("id") or ""),
                name=str(function.get("name") or ""),
                arguments=str(function.get("arguments") or ""),
            )
        )
    # A reasoning item must be followed by what it led to; one that led nothing (an answer
    # cut off while it thought) is left out rather than refused.
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def input_items(messages: Sequence[ChatMessage]) -> list[NativeInput]:
    """The managed prompt (chat form, as the pipeline built it) as Responses input items."""
    items: list[NativeInput] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            items += _assistant_items(message)
        elif role == "tool":
            content = message.get("content")
            output = content if isinstance(content, str) else _input_content(content)
            items.append(
                FunctionCallOutputItem(
                    type="function_call_output",
                    call_id=str(message.get("tool_call_id") or ""),
                    output=output,
                )
            )
        else:
            parts = _input_content(message.get("content"))
            items.append(MessageItem(type="message", role=role, content=parts))
    return items


# ---- answer: output items → the chat form stored ----------------------------------------


def _message_text(item: JSONObject) -> str:
    parts = item.get("content") or ()
    return "".join(
        str(part.get("text") or part.get("refusal") or "")
        for part in parts
        if isinstance(part, dict)
    )


def _summary(item: JSONObject) -> str:
    return "".join(str(part.get("text") or "") for part in item.get("summary") or ())


def _tool_call(item: JSONObject) -> ToolCall:
    return {
        "id": str(item.get("call_id") or ""),
        "type": "function",
        "function": {"name": item.get("name") or "", "arguments": item.get("arguments") or ""},
    }


def chat_answer(output: list[JSONObject]) -> ChatMessage:
    """Output items (as the provider sent them) as the assistant message stored: text,
    function calls as tool calls, reasoning summaries as ``reasoning_content``, every other
    item as a native block."""
    message: ChatMessage = {"role": "assistant", "content": None}
    text = "".join(_message_text(item) for item in output if item.get("type") == "message")
    message["content"] = text or None
    calls = [_tool_call(item) for item in output if item.get("type") == "function_call"]
    if calls:
        message["tool_calls"] = calls
    summaries = [_summary(item) for item in output if item.get("type") == "reasoning"]
    if any(summaries):
        message["reasoning_content"] = "\n\n".join(s for s in summaries if s)
    blocks: list[ThinkingBlockParam] = [
        NativeBlock(type="openai_item", item=item)
        for item in output
        if item.get("type") not in _ANSWER_ITEMS
    ]
    if blocks:
        message["thinking_blocks"] = blocks
    return message


def finish_reason(response: JSONObject) -> str:
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return "content_filter" if reason == "content_filter" else "length"
    output = response.get("output") or ()
    return "tool_calls" if any(i.get("type") == "function_call" for i in output) else "stop"


def chat_usage(usage: JSONObject | None) -> ChatUsage | None:
    """A Responses ``usage`` in the chat form (what usage_of and the doors read)."""
    if not usage:
        return None
    prompt = int(usage.get("input_tokens") or usage.get("prompt_tokens") or 0)
    completion = int(usage.get("output_tokens") or usage.get("completion_tokens") or 0)
    cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = int((usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0)
    return ChatUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        prompt_tokens_details={"cached_tokens": cached},
        completion_tokens_details={"reasoning_tokens": reasoning},
    )


# ---- stream: typed events → chat chunks (the event rides along) -------------------------


def _chunk(event: JSONObject, delta: Delta | None = None) -> ChatChunk:
    return {
        "object": "chat.completion.chunk",
        "responses_event": event,
        "choices": [] if delta is None else [{"index": 0, "delta": delta}],
    }


def event_chunk(event: JSONObject, calls: list[str]) -> ChatChunk:
    """One typed event as a chat chunk the stream lifecycle accumulates (text, reasoning
    summary, whole function calls, native blocks, the finish and usage), with the event
    itself under ``responses_event`` for the Responses door to pass on. ``calls``: the
    function calls seen so far (their chat indexes)."""
    kind = event.get("type")
    if kind == "response.output_text.delta":
        return _chunk(event, {"content": str(event.get("delta") or "")})
    if kind == "response.reasoning_summary_text.delta":
        return _chunk(event, {"reasoning_content": str(event.get("delta") or "")})
    if kind == "response.output_item.done":
        item = event.get("item") or {}
        if item.get("type") == "function_call":
            calls.append(str(item.get("id") or ""))
            call = _tool_call(item)
            piece: ToolCallDelta = {
                "index": len(calls) - 1,
                "id": str(call["id"]),
                "type": "function",
                "function": {**call["function"]},
            }
            return _chunk(event, {"tool_calls": [piece]})
        if item.get("type") not in _ANSWER_ITEMS:
            native = NativeBlock(type="openai_item", item=item)
            return _chunk(event, {"thinking_blocks": [native]})
    if kind in ("response.completed", "response.incomplete"):
        response = event.get("response") or {}
        chunk = _chunk(event)
        chunk["choices"] = [{"index": 0, "delta": {}, "finish_reason": finish_reason(response)}]
        chunk["usage"] = chat_usage(response.get("usage"))
        return chunk
    return _chunk(event)
