"""Anthropic messages in chat form straight from the parsed JSON, for the shapes agents send.

An agent resends its whole history on every call: ~100 messages of text, tool calls and tool
results. Validating them as pydantic models (``MessageParam`` and its blocks), translating the
models (app/messages/translate.py) and validating the chat form again cost ~1 ms of an agent
call. ``plain_messages`` reads the JSON once and writes the chat form directly, for messages
whose every part it can vouch for: a text, tool_use, tool_result (of text), thinking or
redacted_thinking block with fields of the exact JSON types ``MessageParam`` accepts, in the
message role they belong to, no message empty but a final assistant one. Anything else (an
image, a document, a wrong type, a missing field, an unknown key) is None: the request is then
validated and translated by the models, which give the answer or the 400 they always gave. The
chat form is the one ``chat_messages`` makes of the validated models (a test compares the two).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import orjson

from app.wire.anthropic import CacheControl
from app.wire.chat import ChatMessage, ContentPart, TextPart, ThinkingBlockParam, ToolCall

__all__ = ["plain_messages"]

_MESSAGE_KEYS = frozenset({"role", "content"})


class _Unplain(Exception):
    """A part this module does not vouch for: the models take the request."""


def _cache_control(block: dict[str, object]) -> CacheControl | None:
    mark = block.get("cache_control")
    if mark is None:
        return None
    if type(mark) is not dict:
        raise _Unplain
    return dict(mark)  # as the model holds it: a copy of the object


def _text(block: dict[str, object]) -> TextPart:
    text = block.get("text")
    if type(text) is not str:
        raise _Unplain
    part: TextPart = {"type": "text", "text": text}
    mark = _cache_control(block)
    if mark is not None:
        part["cache_control"] = mark
    return part


def _typed(blocks: list[object]) -> Iterator[tuple[object, dict[str, object]]]:
    """Each block with its ``type``; anything but an object is not vouched for."""
    for block in blocks:
        if type(block) is not dict:
            raise _Unplain
        yield block.get("type"), block


def _id(block: dict[str, object], key: str) -> str:
    value = block.get(key)
    if type(value) is not str or not value:
        raise _Unplain
    return value


def _tool_message(block: dict[str, object]) -> ChatMessage:
    tool_use_id = _id(block, "tool_use_id")
    is_error = block.get("is_error")
    if is_error is not None and type(is_error) is not bool:
        raise _Unplain
    mark = _cache_control(block)
    given = block.get("content")
    content: str | list[ContentPart]
    if given is None or type(given) is str:
        content = given or ""
        if mark is not None:
            content = [{"type": "text", "text": content}]
    elif type(given) is list:
        parts: list[ContentPart] = []
        for part in given:
            if type(part) is not dict or part.get("type") != "text":
                raise _Unplain  # an image or a document: the models translate it
            parts.append(_text(part))
        content = parts or ([{"type": "text", "text": ""}] if mark is not None else "")
    else:
        raise _Unplain
    if mark is not None and isinstance(content, list):
        content[-1] = cast(ContentPart, {**content[-1], "cache_control": mark})
    message: ChatMessage = {"role": "tool", "tool_call_id": tool_use_id, "content": content}
    if is_error:
        message["is_error"] = True
    return message


def _user(blocks: list[object], out: list[ChatMessage]) -> None:
    tools: list[ChatMessage] = []
    parts: list[ContentPart] = []
    for kind, block in _typed(blocks):
        if kind == "tool_result":
            content, tool_use_id = block.get("content"), block.get("tool_use_id")
            if (  # an agent's usual result: text, unmarked, not an error
                type(content) is str
                and type(tool_use_id) is str
                and tool_use_id
                and block.get("cache_control") is None
                and ((error := block.get("is_error")) is None or error is False)
            ):
                tools.append({"role": "tool", "tool_call_id": tool_use_id, "content": content})
            else:
                tools.append(_tool_message(block))
        elif kind == "text":
            parts.append(_text(block))
        else:
            raise _Unplain
    out.extend(tools)
    if parts:
        out.append({"role": "user", "content": parts})


def _tool_call(block: dict[str, object]) -> ToolCall:
    call_id, name = _id(block, "id"), _id(block, "name")
    arguments = block.get("input")
    if type(arguments) is not dict:
        raise _Unplain
    call: ToolCall = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }
    mark = _cache_control(block)
    if mark is not None:
        call["cache_control"] = mark
    return call


def _assistant(blocks: list[object]) -> ChatMessage:
    parts: list[TextPart] = []
    calls: list[ToolCall] = []
    thinking: list[ThinkingBlockParam] = []
    reasoning: list[str] = []
    for kind, block in _typed(blocks):
        if kind == "tool_use":
            calls.append(_tool_call(block))
        elif kind == "text":
            parts.append(_text(block))
        elif kind == "thinking":
            text, signature = block.get("thinking"), block.get("signature")
            if type(text) is not str or type(signature) is not str:
                raise _Unplain
            reasoning.append(text)
            if signature:  # unsigned thinking (another provider's reasoning) is text only
                thinking.append({"type": "thinking", "thinking": text, "signature": signature})
        elif kind == "redacted_thinking":
            data = block.get("data")
            if type(data) is not str:
                raise _Unplain
            thinking.append({"type": "redacted_thinking", "data": data})
        else:
            raise _Unplain
    content: str | list[ContentPart] | None = None
    if parts:
        marked = any("cache_control" in part for part in parts)
        content = [*parts] if marked else "".join(part["text"] for part in parts)
    return assistant_chat(content, calls, thinking, reasoning)


def assistant_chat(
    content: str | list[ContentPart] | None,
    calls: list[ToolCall],
    thinking: list[ThinkingBlockParam],
    reasoning: list[str],
) -> ChatMessage:
    """An assistant turn in chat form: its content, and its tool calls, thinking blocks and
    reasoning text when it has any (both translations build it here)."""
    message: ChatMessage = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["thinking_blocks"] = thinking
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    return message


def plain_messages(messages: object) -> list[ChatMessage] | None:
    """The request's ``messages`` (as parsed) in chat form, or None when the models must
    validate them (any shape not vouched for here, valid or not)."""
    if type(messages) is not list or not messages:
        return None
    out: list[ChatMessage] = []
    last = len(messages) - 1
    try:
        for index, message in enumerate(messages):
            if type(message) is not dict or message.keys() != _MESSAGE_KEYS:
                return None
            role, content = message["role"], message["content"]
            if not content and not (index == last and role == "assistant"):
                return None  # empty content: the models say where
            if role != "user" and role != "assistant":
                return None
            if type(content) is str:
                out.append({"role": role, "content": content})
            elif type(content) is not list:
                return None
            elif role == "user":
                _user(content, out)
            else:
                out.append(_assistant(content))
    except _Unplain:
        return None
    return out
