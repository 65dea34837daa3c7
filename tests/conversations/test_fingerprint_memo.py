"""Content hashes remembered by content (app/conversations/fingerprint.py) are the hashes the
canonical form gives: a long text message's, and since an agent resends its calls on every
call, a tool-call message's (remembered by what it calls)."""

from __future__ import annotations

from typing import Any

from app.conversations import fingerprint
from app.conversations.fingerprint import _digest, content_hash


def _call(call_id: Any = "call_1", name: Any = "read", arguments: Any = '{"path": "a"}') -> Any:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


MESSAGES: list[dict[str, Any]] = [
    {"role": "assistant", "content": None, "tool_calls": [_call()]},
    {"role": "assistant", "tool_calls": [_call()]},  # the same canonical form as above
    {"role": "assistant", "content": "", "tool_calls": [_call()]},
    {"role": "assistant", "content": "Reading.", "tool_calls": [_call()]},
    {"role": "assistant", "content": None, "tool_calls": [_call(arguments='{"path":"a"}')]},
    {"role": "assistant", "content": None, "tool_calls": [_call(arguments='{"path": "b"}')]},
    {"role": "assistant", "content": None, "tool_calls": [_call(call_id="call_2")]},
    {"role": "assistant", "content": None, "tool_calls": [_call(name="grep")]},
    {"role": "assistant", "content": None, "tool_calls": [_call(), _call(call_id="call_2")]},
    {"role": "assistant", "content": None, "tool_calls": [_call(call_id=None)]},
    {"role": "assistant", "content": None, "tool_calls": [_call(arguments="not json")]},
    {"role": "assistant", "content": None, "tool_calls": [_call(arguments={"path": "a"})]},
    {"role": "assistant", "content": None, "tool_calls": [_call(call_id=1)]},
    {"role": "assistant", "content": None, "tool_calls": [_call(call_id=True)]},
    {"role": "assistant", "name": "bot", "content": None, "tool_calls": [_call()]},
    {"role": "assistant", "content": "x" * 2000, "tool_calls": [_call()]},
    {"role": "assistant", "content": [{"type": "text", "text": "a"}], "tool_calls": [_call()]},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "y" * 2000},
    {"role": "tool", "tool_call_id": "call_2", "content": "y" * 2000},
]


def test_remembered_hashes_are_the_canonical_ones() -> None:
    fingerprint._remembered.clear()
    for _ in range(2):  # computed, then remembered
        for message in MESSAGES:
            assert content_hash(message) == _digest(message), message


def test_a_tool_call_is_hashed_once() -> None:
    fingerprint._remembered.clear()
    message = {"role": "assistant", "content": None, "tool_calls": [_call(call_id="once")]}
    content_hash(message)
    assert len(fingerprint._remembered) == 1
    again = {"role": "assistant", "content": None, "tool_calls": [_call(call_id="once")]}
    fingerprint._remembered[next(iter(fingerprint._remembered))] = "remembered"
    assert content_hash(again) == "remembered"  # found by what it calls, not hashed again
