"""What a stored turn is stamped with (``conversation_service.append`` and its kin)."""

from __future__ import annotations

from dataclasses import dataclass

from app.conversations.cache_state import CacheState

__all__ = ["Stamp"]


@dataclass(frozen=True, slots=True)
class Stamp:
    """``model``: the conversation's model from now on; ``request_id``: the request that
    stored the messages; ``prompt_tokens``: the upstream's count of the turn's prompt;
    ``cache_state``: the prompt-cache fit's decisions to remember (app/context/cache_fit.py)."""

    model: str
    request_id: str | None = None
    prompt_tokens: int | None = None
    cache_state: CacheState | None = None
