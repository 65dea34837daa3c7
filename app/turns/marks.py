"""Prompt-cache breakpoints on the prompt the owner built (PROMPT.md invariant 7).

The client's ``cache_control`` marks stay on the content they mark in THIS request wherever it
is sent (app/context/breakpoints.py matches by content), and on the newest message even when
contextgate processed it (a tool result sent as its extract): Claude Code marks its newest
message on every call, and that mark is what lets the next call read the whole prompt back.
Then, for Anthropic's models, contextgate marks the end of the stable prefix (the previous
prompt, kept byte for byte) where the client set nothing there, within Anthropic's limit of 4.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from app.context.breakpoints import has_breakpoint, keep_client_breakpoints
from app.context.cache_hints import EPHEMERAL, add_cache_hints, client_marked_cache
from app.wire.anthropic import CacheControl
from app.wire.chat import ChatMessage, ContentPart

__all__ = ["MAX_BREAKPOINTS", "ClientMarks", "place_marks"]

MAX_BREAKPOINTS = 4  # Anthropic refuses a request with more


def _count(messages: list[ChatMessage], tools: Sequence[Mapping[str, object]] | None) -> int:
    marks = sum(1 for t in tools or [] if isinstance(t, dict) and "cache_control" in t)
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            marks += sum(1 for p in content if isinstance(p, dict) and "cache_control" in p)
    return marks


def _mark_of(message: ChatMessage) -> CacheControl | None:
    content = message.get("content")
    if isinstance(content, list):
        for part in reversed(content):
            if isinstance(part, dict) and "cache_control" in part:
                return part["cache_control"]
    return None


def _marked(message: ChatMessage, mark: CacheControl) -> ChatMessage | None:
    content = message.get("content")
    if isinstance(content, str) and content:
        return {**message, "content": [{"type": "text", "text": content, "cache_control": mark}]}
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = cast(ContentPart, {**content[-1], "cache_control": mark})
        return {**message, "content": [*content[:-1], last]}
    return None


@dataclass(frozen=True, slots=True)
class ClientMarks:
    """Where the client's marks are: its messages as it sent them (``incoming``, with their
    content hashes), which of them are new, and its tool definitions."""

    incoming: list[ChatMessage]
    hashes: list[str]
    new_start: int
    tools: Sequence[Mapping[str, object]] | None


def place_marks(
    messages: list[ChatMessage],
    client_marks: ClientMarks,
    *,
    system_count: int,
    stable_end: int,
    provider_hints: bool,
) -> None:
    """Rewrite ``messages`` (what goes upstream) in place. ``stable_end``: how many leading
    messages are the previous prompt, kept; ``provider_hints``: the model is Anthropic's and
    the policy lets contextgate add its own marks."""
    incoming, tools, hashes = client_marks.incoming, client_marks.tools, client_marks.hashes
    request_versions = dict(zip(hashes, incoming, strict=True))
    keep_client_breakpoints(messages, request_versions, set(hashes[client_marks.new_start :]))
    client = client_marked_cache(incoming, tools)
    if client and messages and incoming:
        newest, sent = incoming[-1], messages[-1]
        mark = _mark_of(newest)
        if mark is not None and not has_breakpoint(sent) and newest.get("role") == sent.get("role"):
            marked = _marked(sent, mark)
            if marked is not None and _count(messages, tools) < MAX_BREAKPOINTS:
                messages[-1] = marked
    if not provider_hints:
        return
    if not client:
        add_cache_hints(messages, system_count, stable_end)
        return
    # The client marked elsewhere: add one on the stable prefix's end if it has none and
    # the limit allows (the nearest message at or before it that has content to mark).
    if _count(messages, tools) >= MAX_BREAKPOINTS:
        return
    for position in range(min(stable_end, len(messages)) - 1, system_count - 1, -1):
        if has_breakpoint(messages[position]):
            return  # the client's own mark already holds the prefix
        marked = _marked(messages[position], EPHEMERAL)
        if marked is not None:
            messages[position] = marked
            return
