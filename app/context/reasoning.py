"""Which messages carry their reasoning back upstream.

Providers that think between tool calls need the thinking of the current tool loop (every
assistant message since the newest user message) back exactly as they produced it: Anthropic
rejects a loop whose thinking blocks are missing or altered, DeepSeek-style reasoners expect
their ``reasoning_content``. Older turns' reasoning stays stored and shown, not resent.
"""

from __future__ import annotations

from collections.abc import Collection

from app.context.metadata import ContextUtilization
from app.context.seal import LOOP_CUT_NOTE, Anchor
from app.conversations.messages import ConversationMessage
from app.wire.chat import ChatMessage

__all__ = ["LOOP_CUT_NOTE", "render_messages"]


def _loop_start(sent: list[ConversationMessage]) -> int | None:
    """Index of the newest user message, where the current tool loop starts."""
    for index in range(len(sent) - 1, -1, -1):
        if sent[index].role == "user":
            return index
    return None


def render_messages(
    sent: list[ConversationMessage],
    utilization: ContextUtilization,
    anchors: list[Anchor] | None = None,
    *,
    kept_blocks: Collection[int] = (),
) -> list[ChatMessage]:
    """The messages as sent upstream, reasoning where the loop needs it. ``anchors`` collects
    the answers with a prompt hash, for the seal (app/context/seal.py) to check. A user
    message's frozen per-turn block goes with it when it starts the current loop, or when it
    is one of ``kept_blocks`` (sequence numbers: app/turns/frozen.py)."""
    start = _loop_start(sent)
    carries = [
        m.role == "assistant" and bool(m.thinking_blocks or m.reasoning_content) for m in sent
    ]
    if start is None and any(carries):
        utilization.notes.append(LOOP_CUT_NOTE)
    rendered: list[ChatMessage] = []
    for index, message in enumerate(sent):
        resend = start is not None and index > start and carries[index]
        with_prefix = index == start or message.sequence_number in kept_blocks
        # ``to_openai`` builds the chat form (app/conversations/messages.py).
        out = message.to_openai(with_reasoning=resend, with_prefix=with_prefix)
        if anchors is not None and message.prompt_hash and message.role == "assistant":
            anchors.append(Anchor(out, message, resend))
        rendered.append(out)
    return rendered
