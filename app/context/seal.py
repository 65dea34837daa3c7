"""The prompt seal: the hash of each prompt, and whether the previous one was kept.

Every answer contextgate stores carries the hash of the prompt it answered (``prompt_hash``). The
hash is a chain over the messages as sent (before provider cache marks, which move every call):
``chain(h, m) = blake2b(h + encode(m))``, so the prompt owner (app/turns/owner.py) extends the
previous prompt's hash with the messages it appends, without re-encoding what it kept.

- The previous prompt survived as this prompt's prefix exactly when the newest stored answer's
  hash equals the chain at its position: ``cache_stats.prefix_kept`` is that fact.
- An answer of the current tool loop whose prefix changed (a rebase cleared a tool result before
  it) keeps its thinking: signatures cover the thinking text, and providers accept edits before
  it (Anthropic's own context editing clears tool results in a thinking loop). The loop's
  reasoning is withheld only when the loop's start was cut (``LOOP_CUT_NOTE``): then the
  provider's extended thinking is turned off for the call, as a counted, reported last resort.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from app.context.metadata import ContextUtilization
from app.conversations.messages import ConversationMessage
from app.wire.chat import ChatMessage

__all__ = [
    "EDITED_BEFORE_THINKING_NOTE",
    "LOOP_CUT_NOTE",
    "Anchor",
    "SealResult",
    "chain_hash",
    "seal_prompt",
]

LOOP_CUT_NOTE = (
    "reasoning of the current tool loop was not resent: the loop's start did not fit the "
    "budget, and thinking blocks may only be resent with everything before them unchanged"
)
EDITED_BEFORE_THINKING_NOTE = (
    "the prompt before the current tool loop's answer at message {index} was rewritten by a "
    "rebase; the loop's thinking blocks are resent unchanged with their signatures"
)


@dataclass(slots=True)
class Anchor:
    """A rendered assistant message that was answered through contextgate (it has a hash)."""

    rendered: ChatMessage
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


def _encode(message: ChatMessage) -> bytes:
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def chain_hash(previous: str, messages: Iterable[ChatMessage]) -> str:
    """The seal's hash of a prompt that starts with a prompt hashed ``previous`` ("" at the
    start) and goes on with ``messages``."""
    digest = bytes.fromhex(previous) if previous else b""
    for message in messages:
        digest = hashlib.blake2b(digest + _encode(message), digest_size=16).digest()
    return digest.hex()


def _scan(
    messages: list[ChatMessage], anchors: list[Anchor], previous: ConversationMessage | None
) -> tuple[str, bool | None, int | None]:
    """The prompt's hash, whether the previous answer's prefix is unchanged, and the index of
    the first answer whose reasoning is resent after a changed prefix."""
    where = {id(anchor.rendered): anchor for anchor in anchors}
    digest = ""
    previous_kept: bool | None = None
    edited_at: int | None = None
    for index, rendered in enumerate(messages):
        anchor = where.get(id(rendered))
        if anchor is not None and anchor.rendered is rendered:
            matches = digest == anchor.message.prompt_hash
            if anchor.message is previous:
                previous_kept = matches
            if anchor.resends_reasoning and not matches and edited_at is None:
                edited_at = index
        digest = chain_hash(digest, (rendered,))
    return digest, previous_kept, edited_at


def seal_prompt(
    messages: list[ChatMessage],
    anchors: list[Anchor],
    utilization: ContextUtilization,
    *,
    previous: ConversationMessage | None,
    loop_cut: bool = False,
) -> SealResult:
    """Hash the prompt and check the anchors against what is sent before them. ``previous``:
    the newest stored message, if an answer this prompt resends; ``loop_cut``: the loop's start
    did not fit (its reasoning is out, so thinking must be off for this call)."""
    prompt_hash, previous_kept, edited_at = _scan(messages, anchors, previous)
    if edited_at is not None:
        utilization.notes.append(EDITED_BEFORE_THINKING_NOTE.format(index=edited_at))
    return SealResult(prompt_hash, previous_kept, loop_cut)
