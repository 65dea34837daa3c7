"""Fit history into a token budget as a contiguous, tool-coherent tail.

Positions are absolute: a message's ``start_tokens`` is the number of tokens stored before it
in its conversation. The cut is quantized to multiples of a chunk counted from the start of the
history region, so while a conversation grows by a few hundred tokens a turn, the first kept
message stays the same until the tail outgrows a whole chunk; the prompt's prefix stays
byte-identical across turns and providers' prompt caches keep hitting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.conversations.messages import ConversationMessage

__all__ = ["FitResult", "drop_incoherent", "fit_history", "history_cut"]


def _effective_chunk(chunk_tokens: int, available: int) -> int:
    # A chunk bigger than the room it trims would throw away far more than needed.
    return max(1, min(chunk_tokens, available // 4)) if available > 0 else 1


def history_cut(region_start: int, region_end: int, available: int, chunk_tokens: int) -> int:
    """The absolute position from which history messages are kept (whole messages only)."""
    total = region_end - region_start
    if total <= available:
        return region_start
    if available <= 0:
        return region_end
    chunk = _effective_chunk(chunk_tokens, available)
    need = total - available
    return region_start + -(-need // chunk) * chunk


@dataclass(slots=True)
class FitResult:
    kept: list[ConversationMessage] = field(default_factory=list)
    excluded_count: int = 0
    tokens: int = 0


def drop_incoherent(messages: list[ConversationMessage]) -> list[ConversationMessage]:
    """Remove tool results whose call is gone and tool calls whose results are missing."""
    call_ids = {
        str(call.get("id"))
        for m in messages
        if m.role == "assistant" and m.tool_calls
        for call in m.tool_calls
    }
    result_ids = {m.tool_call_id for m in messages if m.role == "tool"}
    kept: list[ConversationMessage] = []
    for message in messages:
        if message.role == "tool" and message.tool_call_id not in call_ids:
            continue
        if message.role == "assistant" and message.tool_calls:
            if any(str(call.get("id")) not in result_ids for call in message.tool_calls):
                continue
        kept.append(message)
    return kept


def fit_history(
    history: list[ConversationMessage],
    *,
    region_start: int,
    region_end: int,
    region_count: int,
    available: int,
    chunk_tokens: int,
) -> FitResult:
    """Keep the newest whole messages of the region that fit in ``available`` tokens.

    ``history`` holds (at least) every region message at or after the cut, oldest first; the
    region spans ``[region_start, region_end)`` in absolute token positions and counts
    ``region_count`` messages in all (loaded or not).
    """
    cut = history_cut(region_start, region_end, available, chunk_tokens)
    tail = [m for m in history if m.start_tokens >= cut]
    kept = drop_incoherent(tail)
    tokens = sum(m.token_count for m in kept)
    return FitResult(kept=kept, excluded_count=region_count - len(kept), tokens=tokens)
