"""The per-turn block (memories, date, recalled messages) frozen with its user message.

A block is made for a new user message and stored with it (``messages.context_prefix``): the
later calls of that message's tool loop resend it byte for byte, so the provider's cached prefix
holds. Later turns get blocks of their own; an older message keeps sending its block only while
it is at or after the cache-aware fit's ``prefix_floor``, which the next rebase moves to the
current turn: old blocks leave the prompt when it is rewritten anyway, at no cache write of
their own, instead of staying in every later prompt (without the cache-aware fit, only the
newest user message is sent with its block). A message's stored token count is its content's;
a block's tokens are counted where it is sent.
"""

from __future__ import annotations

from app.conversations.messages import ConversationMessage
from app.core.settings import Settings
from app.tokens.counter import TokenCounter

__all__ = ["freeze_user_prefix", "frozen_blocks", "frozen_prefix_tokens"]


def freeze_user_prefix(new: list[ConversationMessage], prefix: str) -> None:
    """Store the per-turn context sent before a new user message with it: the next calls of
    its tool loop resend that message exactly as this one did (the provider's cached prefix
    holds). The message's own token count stays its content's: the block is sent only while
    the message is the newest user message (``frozen_prefix_tokens``), not with later turns,
    which get their own (a recalled block kept in every turn grew a long chat by up to
    ``recall_token_cap`` per turn and quadrupled its compactions)."""
    if not prefix:
        return
    for message in reversed(new):
        if message.role == "user":
            message.context_prefix = prefix
            return


def frozen_prefix_tokens(
    tokens: TokenCounter, current: list[ConversationMessage], model: str
) -> int:
    """Tokens of the block frozen with the current turn's user message, sent again by a later
    call of its loop. (On the first call the message is new and has no block yet: that block is
    made, and counted, by memory and recall.)"""
    users = [m for m in current if m.role == "user"]
    if not users or not users[-1].context_prefix:
        return 0
    return _block_tokens(tokens, users[-1].context_prefix, model)


def frozen_blocks(
    settings: Settings,
    tokens: TokenCounter,
    history: list[ConversationMessage],
    current: list[ConversationMessage],
    model: str,
) -> dict[int, int]:
    """The blocks older turns keep (sequence number -> tokens; the cache-aware fit sends
    those at or after its floor): a turn at least ``cache_block_keep_turn_ratio`` times the
    size of its block keeps it (dropping it would cost a cache write of the whole turn, an
    agent's long tool loop); a shorter one, a chat's question and answer, is rewritten once
    without it when the next user message comes, instead of carrying it in every prompt."""
    ratio = settings.cache_block_keep_turn_ratio
    old = [m for m in history if m.role == "user"]
    users = [*old, *(m for m in current if m.role == "user")]
    kept: dict[int, int] = {}
    for message, following in zip(old, users[1:], strict=False):
        if not message.context_prefix:
            continue
        block = _block_tokens(tokens, message.context_prefix, model)
        if following.start_tokens - message.start_tokens >= ratio * block:
            kept[message.sequence_number] = block
    return kept


def _block_tokens(tokens: TokenCounter, prefix: str, model: str) -> int:
    """A block's tokens as sent (``prefix`` and the paragraph break), remembered: the same
    blocks are counted again on every call of a conversation."""
    return tokens.count_cached(f"{prefix}\n\n", model)
