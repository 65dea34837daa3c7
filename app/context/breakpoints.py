"""The client's prompt-cache breakpoints (``cache_control``) where it put them in THIS request.

A message is stored with the breakpoints it carried when it arrived. Clients move their
breakpoints from call to call (Claude Code marks the newest message each time), so a history
rebuilt from storage would carry every old breakpoint too: past 4, Anthropic refuses the
request. So each message sent upstream takes the breakpoints of its version in this request
(matched by content hash, which ignores breakpoints), and a stored message the client did not
resend takes none. Messages contextgate wrote or rewrote (summaries, context blocks) and system
messages are left as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from app.conversations.fingerprint import content_hash
from app.wire.chat import ChatMessage, ContentPart

__all__ = ["has_breakpoint", "keep_client_breakpoints"]


def has_breakpoint(message: ChatMessage) -> bool:
    content = message.get("content")
    if isinstance(content, list):
        return any(isinstance(part, dict) and "cache_control" in part for part in content)
    return False


def _without_breakpoints(message: ChatMessage) -> ChatMessage:
    parts = [
        cast(ContentPart, {k: v for k, v in part.items() if k != "cache_control"})
        if isinstance(part, dict)
        else part
        for part in cast(list[ContentPart], message["content"])  # has_breakpoint: parts
    ]
    return {**message, "content": parts}


def keep_client_breakpoints(
    messages: list[ChatMessage],
    request_versions: Mapping[str, ChatMessage],
    new_hashes: set[str],
) -> None:
    """Rewrite ``messages`` (what goes upstream) in place; ``request_versions``: this request's
    messages by content hash; ``new_hashes``: those stored by this request."""
    client_marks = any(has_breakpoint(m) for m in request_versions.values())
    current = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    for index, message in enumerate(messages):
        if message.get("role") == "system":
            continue
        marked = has_breakpoint(message)
        if not (marked or client_marks):
            continue
        digest = content_hash(message)
        version = request_versions.get(digest)
        if version is not None:
            if marked or has_breakpoint(version):
                messages[index] = {**message, "content": version.get("content")}
        elif marked and digest not in new_hashes and index < current:
            messages[index] = _without_breakpoints(message)
