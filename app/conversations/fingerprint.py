"""Hashes that identify whole messages and whole message sequences.

A message's hash covers its canonical form (role, content, name, tool calls with their
arguments as the JSON they encode, tool_call_id),
so the assistant message a client echoes back (with extra keys such as ``refusal: null``)
hashes like the one contextgate stored. A sequence's hash is a chain over its messages:
``h_i = sha256(h_{i-1} : c_i)``, so two conversations share a chain hash only when they share
every message up to that point. No shortcut over the first characters: those collide.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import orjson

if TYPE_CHECKING:
    from app.wire.chat import ToolCall

__all__ = [
    "canonical_message",
    "chain_hashes",
    "content_hash",
    "extend_chain",
    "matches_prefix",
    "new_messages_start",
]


def _canonical_content(content: object) -> object:
    if content is None or content == "":
        return None
    if isinstance(content, list):
        if all(isinstance(p, dict) and p.get("type") == "text" for p in content):
            return "".join(str(p.get("text", "")) for p in content) or None
        # A prompt-cache breakpoint is not content: clients move it from call to call.
        return [
            {k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p
            for p in content
        ]
    return content


def _canonical_arguments(arguments: object) -> object:
    """Arguments as the JSON value they encode: a client that echoes a call back as an object
    (Anthropic's ``tool_use.input``) re-serializes it with its own spacing and key order."""
    if not arguments:
        return ""
    if not isinstance(arguments, str):
        return arguments
    try:
        return {"json": orjson.loads(arguments)}
    except orjson.JSONDecodeError:
        return arguments


def _canonical_tool_calls(tool_calls: Sequence[ToolCall] | None) -> list[dict[str, object]] | None:
    if not tool_calls:
        return None
    calls = []
    for call in tool_calls:
        function = call.get("function") or {}
        calls.append(
            {
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": _canonical_arguments(function.get("arguments")),
            }
        )
    return calls


def canonical_message(message: Mapping[str, object]) -> dict[str, object]:
    """What a message's hash covers (any message: a client's, as sent, or a stored one)."""
    canonical: dict[str, object] = {
        "role": message.get("role"),
        "content": _canonical_content(message.get("content")),
    }
    if message.get("name"):
        canonical["name"] = message["name"]
    tool_calls = _canonical_tool_calls(cast("list[ToolCall] | None", message.get("tool_calls")))
    if tool_calls:
        canonical["tool_calls"] = tool_calls
    if message.get("tool_call_id"):
        canonical["tool_call_id"] = message["tool_call_id"]
    return canonical


def content_hash(message: Mapping[str, object]) -> str:
    """The message's hash; a long text message's is remembered by content, and a tool call's
    by what it calls (an agent resends its whole history on every call: each tool result and
    each call is hashed once)."""
    content = message.get("content")
    calls = message.get("tool_calls")
    key: tuple[object, ...] | None
    if calls:
        key = _calls_key(message, content, calls)
    elif isinstance(content, str) and len(content) >= REMEMBER_CHARS:
        key = (
            message.get("role"),
            len(content),
            hash(content),
            message.get("name") or None,
            message.get("tool_call_id") or None,
        )
    else:
        key = None
    if key is None:
        return _digest(message)
    found = _remembered.get(key)
    if found is None:
        found = _remembered[key] = _digest(message)
        if len(_remembered) > _REMEMBERED:
            del _remembered[next(iter(_remembered))]  # the oldest
    return found


_PLAIN = (str, type(None))


def _calls_key(
    message: Mapping[str, object], content: object, calls: object
) -> tuple[object, ...] | None:
    """What the canonical form holds of a message with tool calls, as a key, when all of it is
    strings (or None) and the text is short; else None (hashed each time)."""
    role, name, call_id = message.get("role"), message.get("name"), message.get("tool_call_id")
    if not (
        type(role) in _PLAIN
        and type(content) in _PLAIN
        and type(name) in _PLAIN
        and type(call_id) in _PLAIN
        and type(calls) is list
    ):
        return None
    if content is not None and len(content) >= REMEMBER_CHARS:  # type: ignore[arg-type]
        return None  # a long text is not kept in a key
    key: list[object] = ["tool_calls", role, content, name, call_id]
    for call in calls:
        function = call.get("function") if type(call) is dict else None
        if type(function) is not dict:
            return None
        parts = (call.get("id"), function.get("name"), function.get("arguments"))
        if not all(type(part) in _PLAIN for part in parts):
            return None
        key.extend(parts)
    return tuple(key)


def _digest(message: Mapping[str, object]) -> str:
    data = orjson.dumps(canonical_message(message), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()


# Text messages this long have their hash remembered, keyed by what the canonical form holds of
# them (role, the text's length and hash, name, tool_call_id): like token counts (tokens.py).
REMEMBER_CHARS = 1024
_REMEMBERED = 16_384
_remembered: dict[tuple[object, ...], str] = {}


def extend_chain(previous: str, message_hash: str) -> str:
    return hashlib.sha256(f"{previous}:{message_hash}".encode()).hexdigest()


def chain_hashes(hashes: Iterable[str], start: str = "") -> list[str]:
    """Chain hash after each message: element i identifies messages[0..i]."""
    chain: list[str] = []
    current = start
    for message_hash in hashes:
        current = extend_chain(current, message_hash)
        chain.append(current)
    return chain


def matches_prefix(stored_head: str, stored_count: int, chain: Sequence[str]) -> bool:
    """Whether the incoming messages start with the whole stored sequence."""
    if stored_count == 0:
        return True
    return len(chain) >= stored_count and chain[stored_count - 1] == stored_head


def new_messages_start(
    *,
    stored_count: int,
    stored_head: str,
    incoming_hashes: list[str],
    stored_tail_hashes: list[str],
    stored_system_hashes: list[str],
) -> int:
    """Where the messages a client sent for a known conversation stop being already stored.

    The client may send the whole history (it then starts with the whole stored sequence), or
    only the new messages; it may repeat the stored system prompt, or resend the last stored
    messages (a retry). Whatever it sends, each message is stored once.
    """
    chain = chain_hashes(incoming_hashes)
    if matches_prefix(stored_head, stored_count, chain):
        return stored_count
    # A repeat of the stored system prompt is never stored again.
    system = 0
    while (
        system < len(incoming_hashes)
        and system < len(stored_system_hashes)
        and incoming_hashes[system] == stored_system_hashes[system]
    ):
        system += 1
    # A retry, or a client that sends a window of the latest messages (behind the system
    # prompt or not), repeats the last stored messages: skip the longest such overlap.
    for skip in dict.fromkeys((system, 0)):
        rest = incoming_hashes[skip:]
        for overlap in range(min(len(rest), len(stored_tail_hashes)), 0, -1):
            if rest[:overlap] == stored_tail_hashes[-overlap:]:
                return skip + overlap
    # New messages only, perhaps behind a repeat of the stored system prompt.
    return system
