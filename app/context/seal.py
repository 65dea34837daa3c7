"""The prompt seal: what each answer was produced for, and what a later call may resend.

Every answer contextgate stores carries the hash of the prompt it answered (``prompt_hash``).
A later call compares it with the hash of what it sends before that answer:

- the thinking of the current tool loop is resent only while everything before each of its
  answers is sent exactly as it was when the provider produced it; when a prefix changed (a
  tool result summarized differently, a document block that left, other instructions), the
  loop's reasoning is withheld, the provider's extended thinking is turned off for this call
  (Anthropic rejects a tool loop whose last answer lacks its thinking while it is on), and
  ``context_utilization.notes`` says so;
- the previous prompt survived as this prompt's prefix exactly when the newest stored answer's
  hash matches: ``cache_stats.prefix_kept`` is that fact, not an inference from the fit.

Hashes are taken over the messages as contextgate renders them, before provider cache hints
(which move every call) are added.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from app.context.metadata import ContextUtilization
from app.conversations.messages import ConversationMessage

if TYPE_CHECKING:
    from app.context.assembler import AssembledContext

__all__ = [
    "EDITED_BEFORE_THINKING_NOTE",
    "LOOP_CUT_NOTE",
    "Anchor",
    "SealResult",
    "seal_assembled",
    "seal_prompt",
]

LOOP_CUT_NOTE = (
    "reasoning of the current tool loop was not resent: the loop's start did not fit the "
    "budget, and thinking blocks may only be resent with everything before them unchanged"
)
EDITED_BEFORE_THINKING_NOTE = (
    "reasoning of the current tool loop was not resent (extended thinking off for this call): "
    "what precedes the answer at message {index} changed since the provider produced it, and "
    "thinking may only be resent after an unchanged prefix"
)
_REASONING_KEYS = ("thinking_blocks", "reasoning_content")


@dataclass(slots=True)
class Anchor:
    """A rendered assistant message that was answered through contextgate (it has a hash)."""

    rendered: dict[str, Any]
    message: ConversationMessage
    resends_reasoning: bool


@dataclass(slots=True)
class SealResult:
    prompt_hash: str  # of the whole prompt: stored with this request's answer
    previous_kept: bool | None = None  # None: no previous answer with a hash to compare
    # The current loop's reasoning is not resent (edited before it, or its start cut): the
    # provider's extended thinking must be off for this call (Anthropic rejects a tool loop
    # whose last answer lacks its thinking while thinking is on).
    reasoning_withheld: bool = False


def _encode(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def _scan(
    messages: list[dict[str, Any]], anchors: list[Anchor], previous: ConversationMessage | None
) -> tuple[str, bool | None, int | None]:
    """The prompt's hash, whether the previous answer's prefix is unchanged, and the index of
    the first answer whose reasoning would be resent after a changed prefix."""
    where = {id(anchor.rendered): anchor for anchor in anchors}
    hasher = hashlib.blake2b(digest_size=16)
    previous_kept: bool | None = None
    edited_at: int | None = None
    for index, rendered in enumerate(messages):
        anchor = where.get(id(rendered))
        if anchor is not None and anchor.rendered is rendered:
            matches = hasher.copy().hexdigest() == anchor.message.prompt_hash
            if anchor.message is previous:
                previous_kept = matches
            if anchor.resends_reasoning and not matches and edited_at is None:
                edited_at = index
        hasher.update(_encode(rendered))
        hasher.update(b"\n")
    return hasher.hexdigest(), previous_kept, edited_at


def _loop_start(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return -1


def seal_prompt(
    messages: list[dict[str, Any]],
    anchors: list[Anchor],
    utilization: ContextUtilization,
    *,
    previous: ConversationMessage | None,
    loop_cut: bool = False,
) -> SealResult:
    """Check the anchors against what is sent before them, withhold the loop's reasoning when
    one was edited, and hash the prompt. ``previous``: the newest stored message, if an answer
    this prompt resends; ``loop_cut``: the loop's start did not fit (its reasoning is out)."""
    prompt_hash, previous_kept, edited_at = _scan(messages, anchors, previous)
    if edited_at is not None:
        for rendered in messages[_loop_start(messages) + 1 :]:
            for key in _REASONING_KEYS:
                rendered.pop(key, None)
        utilization.notes.append(EDITED_BEFORE_THINKING_NOTE.format(index=edited_at))
        prompt_hash, previous_kept, _ = _scan(messages, anchors, previous)
    return SealResult(prompt_hash, previous_kept, edited_at is not None or loop_cut)


def seal_assembled(assembled: AssembledContext, *, newest_sequence: int) -> SealResult:
    """Seal an assembled prompt; ``newest_sequence``: the conversation's newest stored message
    (the previous answer, when this prompt resends it)."""
    previous = next(
        (a.message for a in assembled.anchors if a.message.sequence_number == newest_sequence),
        None,
    )
    utilization = assembled.utilization
    return seal_prompt(
        assembled.messages,
        assembled.anchors,
        utilization,
        previous=previous,
        loop_cut=LOOP_CUT_NOTE in utilization.notes,
    )
