"""Chat form ⇄ OpenAI Responses items, for the native Responses path (native_responses.py).

The conversation is stored in the chat form every door shares. What only the Responses API
has (reasoning items with ``encrypted_content``, hosted tool calls such as
``web_search_call``) is stored verbatim in the assistant message's ``thinking_blocks``, one
``{"type": "openai_item", "item": …}`` block per item, and sent back as it came: the provider
verifies its encrypted reasoning byte for byte. The chat form never sends these blocks.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "NATIVE_BLOCK",
    "NativeUsage",
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


class NativeUsage(TypedDict, total=False):
    """The chat form of a Responses ``usage`` (what usage_of and the doors read)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, int]
    completion_tokens_details: dict[str, int]


# ---- stored blocks ----------------------------------------------------------------------


def native_items(blocks: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The Responses items a message's thinking blocks keep, in order."""
    return [
        block["item"]
        for block in blocks or ()
        if block.get("type") == NATIVE_BLOCK and isinstance(block.get("item"), dict)
    ]


def has_native_blocks(messages: list[dict[str, Any]]) -> bool:
    return any(native_items(message.get("thinking_blocks")) for message in messages)


def without_native_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages for a chat-form call: Responses items are not for it."""
    out = []
    for message in messages:
        blocks = message.get("thinking_blocks")
        if blocks and native_items(blocks):
            kept = [block for block in blocks if block.get("type") != NATIVE_BLOCK]
            message = {k: v for k, v in message.items() if k != "thinking_blocks"}
            if kept:
                message["thinking_blocks"] = kept
        out.append(message)
    return out


# ---- request: chat messages → input items -----------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return "" if content is None else str(content)


def _input_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url") or {}
        url = image.get("url") if isinstance(image, dict) else image
        out: dict[str, Any] = {"type": "input_image", "image_url": url}
        if isinstance(image, dict) and image.get("detail"):
            out["detail"] = image["detail"]
        return out
    if kind == "file":
        return {"type": "input_file", **(part.get("file") or {})}
    return {"type": "input_text", "text": str(part.get("text") or "")}


def _input_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, list):
        if all(isinstance(p, dict) and p.get("type") == "text" for p in content):
            return _text(content)
        return [_input_part(part) for part in content if isinstance(part, dict)]
    return "" if content is None else str(content)


def _assistant_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    items = list(native_items(message.get("thinking_blocks")))
    text = _text(message.get("content"))
    if text:
        items.append({"type": "message", "role": "assistant", "content": text})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": str(call.get("id") or ""),
                "name": str(function.get("name") or ""),
                "arguments": str(function.get("arguments") or ""),
            }
        )
    # A reasoning item must be followed by what it led to; one that led nothing (an answer
    # cut off while it thought) is left out rather than refused.
    while items and items[-1].get("type") == "reasoning":
        items.pop()
    return items


def input_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The managed prompt (chat form, as the pipeline built it) as Responses input items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            items += _assistant_items(message)
        elif role == "tool":
            content = message.get("content")
            output = content if isinstance(content, str) else _input_content(content)
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id") or ""),
                    "output": output,
                }
            )
        else:
            content = _input_content(message.get("content"))
            items.append({"type": "message", "role": role, "content": content})
    return items


# ---- answer: output items → the chat form stored ----------------------------------------


def _message_text(item: dict[str, Any]) -> str:
    parts = item.get("content") or ()
    return "".join(
        str(part.get("text") or part.get("refusal") or "")
        for part in parts
        if isinstance(part, dict)
    )


def _summary(item: dict[str, Any]) -> str:
    return "".join(str(part.get("text") or "") for part in item.get("summary") or ())


def chat_answer(output: list[dict[str, Any]]) -> dict[str, Any]:
    """Output items as the assistant message stored: text, function calls as tool calls,
    reasoning summaries as ``reasoning_content``, every other item as a native block."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    text = "".join(_message_text(item) for item in output if item.get("type") == "message")
    message["content"] = text or None
    calls = [
        {
            "id": str(item.get("call_id") or ""),
            "type": "function",
            "function": {"name": item.get("name") or "", "arguments": item.get("arguments") or ""},
        }
        for item in output
        if item.get("type") == "function_call"
    ]
    if calls:
        message["tool_calls"] = calls
    summaries = [_summary(item) for item in output if item.get("type") == "reasoning"]
    if any(summaries):
        message["reasoning_content"] = "\n\n".join(s for s in summaries if s)
    blocks = [
        {"type": NATIVE_BLOCK, "item": item}
        for item in output
        if item.get("type") not in _ANSWER_ITEMS
    ]
    if blocks:
        message["thinking_blocks"] = blocks
    return message


def finish_reason(response: dict[str, Any]) -> str:
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return "content_filter" if reason == "content_filter" else "length"
    output = response.get("output") or ()
    return "tool_calls" if any(i.get("type") == "function_call" for i in output) else "stop"


def chat_usage(usage: dict[str, Any] | None) -> NativeUsage | None:
    if not usage:
        return None
    prompt = int(usage.get("input_tokens") or usage.get("prompt_tokens") or 0)
    completion = int(usage.get("output_tokens") or usage.get("completion_tokens") or 0)
    cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = int((usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0)
    return NativeUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        prompt_tokens_details={"cached_tokens": cached},
        completion_tokens_details={"reasoning_tokens": reasoning},
    )


# ---- stream: typed events → chat chunks (the event rides along) -------------------------


def _chunk(event: dict[str, Any], delta: dict[str, Any] | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"object": "chat.completion.chunk", "responses_event": event}
    chunk["choices"] = [] if delta is None else [{"index": 0, "delta": delta}]
    return chunk


def event_chunk(event: dict[str, Any], calls: list[str]) -> dict[str, Any]:
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
            call = chat_answer([item])["tool_calls"][0]
            return _chunk(event, {"tool_calls": [{"index": len(calls) - 1, **call}]})
        if item.get("type") not in _ANSWER_ITEMS:
            return _chunk(event, {"thinking_blocks": [{"type": NATIVE_BLOCK, "item": item}]})
    if kind in ("response.completed", "response.incomplete"):
        response = event.get("response") or {}
        chunk = _chunk(event)
        chunk["choices"] = [{"index": 0, "delta": {}, "finish_reason": finish_reason(response)}]
        chunk["usage"] = chat_usage(response.get("usage"))
        return chunk
    return _chunk(event)
