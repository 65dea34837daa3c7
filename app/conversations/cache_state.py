"""What the prompt-cache fit (app/context/cache_fit.py) remembers with a conversation."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CacheState"]


@dataclass(frozen=True, slots=True)
class CacheState:
    """What the fit remembers with the conversation (conversations.cache_* columns).

    ``cut_sequence``: history is sent from this message on (0: from the region start).
    ``cleared_sequence``: tool results before this message are sent as placeholders (but
    those of excluded tools). All only grow, so the prompt's prefix is stable between cuts.
    """

    cut_sequence: int = 0
    cut_tokens: int = 0  # absolute token position of that message (where loading starts)
    cleared_sequence: int = 0
    # User messages from here on are sent with their frozen per-turn block (memories, date,
    # recalled messages); a rebase moves it to the current turn: old blocks leave the prompt
    # when it is rewritten anyway.
    prefix_floor: int = 0
