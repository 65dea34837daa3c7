"""Put retrieved long-term memories (and the compaction bundle) into the outgoing messages.

Modes (``context.memory_injection``):
    user_prefix     "[CONTEXT: <date and time>]" + facts + memories before the newest user text; the
                    system prompt stays byte-identical, so providers' prompt caches keep hitting.
    system_append   the same block appended to the system prompt (one is added if none).
    context_message the block as its own system message right before the newest user message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from app.conversations.messages import prefixed
from app.memories.retrieval import Retrieved
from app.memories.template import DEFAULT_TEMPLATE, Line, render_block
from app.wire.chat import AssistantContent, ChatMessage, MessageContent

__all__ = ["inject", "insert_bundle", "render_context", "render_memories"]

_SYSTEM_ROLES = ("system", "developer")


def render_memories(memories: Sequence[Retrieved]) -> str:
    return "; ".join(f"({m.memory_type}) {' '.join(m.content.split())}" for m in memories)


def render_context(
    memories: Sequence[Retrieved], now: datetime, template: str = DEFAULT_TEMPLATE
) -> str:
    """The context block for retrieved memories alone (see app/memories/template.py)."""
    lines = [Line(m.memory_type, m.importance, m.content, m.updated_at) for m in memories]
    return render_block([], lines, now, template)


def _append_content(content: AssistantContent, block: str) -> MessageContent:
    if isinstance(content, list):
        return [*content, {"type": "text", "text": block}]
    return f"{content}\n\n{block}" if content else block


def _last_user(messages: list[ChatMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None


def inject(messages: list[ChatMessage], block: str, mode: str) -> list[ChatMessage]:
    """A copy of ``messages`` with ``block`` placed as ``mode`` says. Only the message that
    changes is copied: the others stay the objects the assembler rendered (the prompt seal
    finds the answers it checks by identity)."""
    result = list(messages)
    last_user = _last_user(result)
    if mode == "system_append":
        if result and result[0].get("role") in _SYSTEM_ROLES:
            first = result[0].copy()
            first["content"] = _append_content(first.get("content"), block)
            result[0] = first
        else:
            result.insert(0, {"role": "system", "content": block})
    elif mode == "context_message":
        position = last_user if last_user is not None else len(result)
        result.insert(position, {"role": "system", "content": block})
    elif last_user is not None:
        user = result[last_user].copy()
        user["content"] = prefixed(user.get("content"), block)
        result[last_user] = user
    else:  # no user message to prefix (a tool-result continuation): its own message
        result.append({"role": "system", "content": block})
    return result


def insert_bundle(messages: list[ChatMessage], bundle: str) -> list[ChatMessage]:
    """The memory bundle as a system message right after the leading system prompt."""
    position = 0
    while position < len(messages) and messages[position].get("role") in _SYSTEM_ROLES:
        position += 1
    return [*messages[:position], {"role": "system", "content": bundle}, *messages[position:]]
