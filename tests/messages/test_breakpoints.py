"""The client's cache breakpoints of this request, not those stored with old messages."""

from __future__ import annotations

from typing import Any

from app.context.breakpoints import keep_client_breakpoints
from app.conversations.fingerprint import content_hash

CC = {"type": "ephemeral"}


def text(role: str, value: str, *, mark: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "text", "text": value}
    if mark:
        part["cache_control"] = CC
    return {"role": role, "content": [part]}


def test_request_marks_win_stale_marks_go() -> None:
    system = text("system", "rules", mark=True)
    old = text("user", "old question", mark=True)  # stored when it was the newest message
    answer = {"role": "assistant", "content": "old answer"}
    resent = text("user", "resent, now unmarked", mark=True)
    newest = text("user", "newest")
    upstream = [system, old, answer, resent, dict(answer), newest]
    request = [text("user", "resent, now unmarked"), text("user", "newest", mark=True)]
    versions = {content_hash(m): m for m in request}
    keep_client_breakpoints(upstream, versions, {content_hash(request[-1])})
    assert upstream[0] is system  # system untouched
    assert "cache_control" not in upstream[1]["content"][0]  # stored, not resent: stale
    assert "cache_control" not in upstream[3]["content"][0]  # resent without the mark
    assert upstream[5]["content"][0]["cache_control"] == CC  # where the client put it now


def test_nothing_marked_nothing_touched() -> None:
    upstream = [text("user", "a"), {"role": "assistant", "content": "b"}, text("user", "c")]
    before = [dict(m) for m in upstream]
    keep_client_breakpoints(upstream, {content_hash(upstream[-1]): upstream[-1]}, set())
    assert upstream == before


def test_rewritten_current_turn_keeps_its_mark() -> None:
    """A memory prefix on the newest user message changes its hash: its mark stays."""
    rewritten = text("user", "[memory] newest", mark=True)
    upstream = [text("user", "first"), {"role": "assistant", "content": "x"}, rewritten]
    keep_client_breakpoints(
        upstream, {content_hash(text("user", "newest")): text("user", "newest", mark=True)}, set()
    )
    assert upstream[2]["content"][0]["cache_control"] == CC
