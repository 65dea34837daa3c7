"""Chat-form messages as Anthropic's Messages API ``system`` and ``messages``: litellm's
translation (``translate_system_message`` and ``anthropic_messages_pt``), reproduced for the
direct Anthropic path (app/llm/anthropic_direct.py; the parameters are
anthropic_direct_request.py's).

The leading system messages become the ``system`` blocks; user parts, images and tool results
(``tool_result`` blocks) are merged into one user message per run, assistant messages into one
assistant message per run, its ``thinking_blocks`` first (unsigned ones dropped), its text, then
its tool calls as ``tool_use`` blocks with parsed input; ``cache_control`` stays where the client
put it; empty texts get litellm's placeholder; the last assistant text loses its trailing
whitespace. A shape litellm would translate otherwise raises :class:`Unsupported`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

__all__ = ["Unsupported", "conversation", "system_blocks"]


class Unsupported(Exception):
    """A request this translation does not cover: it goes through litellm."""


_EMPTY_TEXT = "[System: Empty message content sanitised to satisfy protocol]"
_INVALID_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_ENCRYPTED_PREFIX = "litellm_encrypted_reasoning:"


def _cache_control(source: Mapping[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """litellm's ``add_cache_control_to_content``: a dict ``cache_control`` is copied."""
    value = source.get("cache_control")
    if value is not None and isinstance(value, dict):
        target["cache_control"] = dict(value)
    return target


def _sanitize_id(tool_id: object) -> str:
    if not isinstance(tool_id, str):
        raise Unsupported("a tool call id that is not a string")
    return _INVALID_ID_CHARS.sub("_", tool_id) or "tool_use_id"


def _image(part: Mapping[str, Any]) -> dict[str, Any]:
    value = part.get("image_url")
    if isinstance(value, str):
        url, media_format = value, None
    elif isinstance(value, dict):
        url, media_format = value.get("url", ""), value.get("format")
    else:
        raise Unsupported("an image part without image_url")
    if not isinstance(url, str) or url.startswith("http://"):
        raise Unsupported("an image litellm would fetch")
    if url.startswith("https://"):
        return {"type": "image", "source": {"type": "url", "url": url}}
    pieces = url.split("data:")
    if len(pieces) < 2:
        raise Unsupported("an image URL litellm refuses")
    halves = pieces[1].split(";base64,")
    if len(halves) != 2:
        raise Unsupported("an image URL litellm refuses")
    media_type, data = halves
    media_type = media_format if media_format else media_type.replace("\\/", "/")
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _user_part(part: object) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise Unsupported("a content part that is not an object")
    kind = part.get("type", "")
    if kind == "text":
        return _cache_control(part, {"type": "text", "text": part["text"]})
    if kind == "image_url":
        return _cache_control(part, _image(part))
    raise Unsupported(f"a {kind!r} content part")


def _tool_result(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    translated: object = ""
    if isinstance(content, str):
        translated = content
    elif isinstance(content, list):
        parts: list[dict[str, Any]] = []
        for part in content:
            if not isinstance(part, dict):
                raise Unsupported("a tool result part that is not an object")
            if part.get("type") == "text":
                text: dict[str, Any] = {"type": "text", "text": part["text"]}
                if part.get("cache_control") is not None:
                    text["cache_control"] = part["cache_control"]
                parts.append(text)
            elif part.get("type") == "image_url":
                url = part.get("image_url")
                url = url.get("url") if isinstance(url, dict) else url
                if isinstance(url, str) and re.match(r"data:(application/pdf|text/plain)[;,]", url):
                    raise Unsupported("a document in a tool result")
                parts.append(_cache_control(part, _image(part)))
            else:
                raise Unsupported(f"a {part.get('type')!r} part in a tool result")
        translated = parts
    elif content is not None:
        raise Unsupported("a tool result that is neither text nor parts")
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": _sanitize_id(message.get("tool_call_id")),
        "content": translated,
    }
    if message.get("cache_control") is not None:
        result["cache_control"] = message["cache_control"]
    return result


def _sanitize_empty_text(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """litellm's ``_sanitize_empty_text_content`` (user and assistant messages)."""
    content = message.get("content")
    if isinstance(content, str):
        if not content.strip():
            return {**message, "content": _EMPTY_TEXT}
        return message
    if isinstance(content, list):
        blocks: list[object] = []
        changed = False
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                if not isinstance(text, str) or not text.strip():
                    blocks.append({**block, "text": _EMPTY_TEXT})
                    changed = True
                    continue
            blocks.append(block)
        if changed:
            return {**message, "content": blocks}
    return message


def _unsignable(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    field = block.get("signature") if kind == "thinking" else block.get("data")
    if kind in ("thinking", "redacted_thinking") and (
        isinstance(field, str) and field.startswith(_ENCRYPTED_PREFIX)
    ):
        return True
    if kind != "thinking":
        return False
    signature = block.get("signature")
    return not (isinstance(signature, str) and len(signature) > 0)


def _arguments(raw: object) -> object:
    if raw is None:
        return {}
    if not isinstance(raw, str):
        raise Unsupported("tool call arguments that are not a string")
    if not raw.strip():
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:  # what orjson refuses and json reads (integers past 64 bits, NaN)
        return json.loads(raw)
    except json.JSONDecodeError:
        raise Unsupported("tool call arguments litellm would repair") from None


def _assistant_blocks(message: Mapping[str, Any], seen_ids: set[str]) -> list[dict[str, Any]]:
    if message.get("provider_specific_fields") or message.get("function_call") is not None:
        raise Unsupported("an assistant message with provider fields or a function call")
    blocks: list[dict[str, Any]] = []
    thinking = message.get("thinking_blocks")
    calls = message.get("tool_calls")
    if thinking is not None:
        if not isinstance(thinking, list) or not all(isinstance(b, dict) for b in thinking):
            raise Unsupported("thinking blocks that are not objects")
        blocks.extend(dict(block) for block in thinking if not _unsignable(block))
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise Unsupported("an assistant part that is not text")
            text = part.get("text", "")
            if len(text) > 0:
                blocks.append(_cache_control(part, {"type": "text", "text": text}))
    elif isinstance(content, str) and content:
        blocks.append(_cache_control(message, {"type": "text", "text": content}))
    elif content is not None and not isinstance(content, str):
        raise Unsupported("assistant content that is neither text nor parts")
    if calls is not None:
        if not isinstance(calls, list):
            raise Unsupported("tool_calls that are not a list")
        for call in calls:
            if not isinstance(call, dict) or call.get("type") != "function":
                raise Unsupported("a tool call that is not a function call")
            call_id = call.get("id")
            if isinstance(call_id, str) and call_id.startswith("srvtoolu_"):
                raise Unsupported("a server tool call")
            function = call.get("function")
            if not isinstance(function, dict):
                raise Unsupported("a tool call without a function")
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": _sanitize_id(call_id),
                "name": function.get("name"),
                "input": _arguments(function.get("arguments")),
            }
            _cache_control(call, block)
            if block["id"] in seen_ids:  # litellm's check is on the sanitized id
                continue
            seen_ids.add(block["id"])
            blocks.append(block)
    return blocks


def system_blocks(run: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """litellm's ``translate_system_message`` for the leading run of system messages."""
    blocks: list[dict[str, Any]] = []
    for message in run:
        content = message.get("content")
        if isinstance(content, str):
            if not content:
                continue
            block: dict[str, Any] = {"type": "text", "text": content}
            if "cache_control" in message:
                block["cache_control"] = message["cache_control"]
            blocks.append(block)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text":
                    raise Unsupported("a system part that is not text")
                if not part.get("text"):
                    continue
                block = {"type": "text", "text": part.get("text")}
                if "cache_control" in part:
                    block["cache_control"] = part["cache_control"]
                blocks.append(block)
        else:
            raise Unsupported("system content that is neither text nor parts")
    return blocks


def conversation(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """litellm's ``anthropic_messages_pt`` for the messages after the leading system run."""
    if not messages:
        raise Unsupported("no message after the system prompt")
    for message in messages:
        if message.get("role") not in ("user", "assistant", "tool"):
            raise Unsupported(f"a {message.get('role')!r} message after the first other one")
    cleaned = [
        _sanitize_empty_text(m) if m.get("role") in ("user", "assistant") else m for m in messages
    ]
    result: list[dict[str, Any]] = []
    i = 0
    while i < len(cleaned):
        user: list[dict[str, Any]] = []
        while i < len(cleaned) and cleaned[i]["role"] in ("user", "tool"):
            message = cleaned[i]
            if message["role"] == "user":
                content = message.get("content")
                if isinstance(content, list):
                    user.extend(_user_part(part) for part in content)
                elif isinstance(content, str):
                    user.append(_cache_control(message, {"type": "text", "text": content}))
                else:
                    raise Unsupported("user content that is neither text nor parts")
            else:
                user.append(_tool_result(message))
            i += 1
        if user:
            result.append({"role": "user", "content": user})
        seen_ids: set[str] = set()
        assistant: list[dict[str, Any]] = []
        while i < len(cleaned) and cleaned[i]["role"] == "assistant":
            assistant.extend(_assistant_blocks(cleaned[i], seen_ids))
            i += 1
        if assistant:
            result.append({"role": "assistant", "content": assistant})
    if not result or result[0]["role"] != "user":
        raise Unsupported("a conversation that does not start with a user message")
    if result[-1]["role"] == "assistant":
        for block in result[-1]["content"]:
            if block["type"] == "text":
                block["text"] = block["text"].rstrip()
    return result
