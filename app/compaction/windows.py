"""Which turns a compaction takes, and how the summarizer reads them (pure functions)."""

from __future__ import annotations

from dataclasses import dataclass

from app.compaction.repository import TurnSpan
from app.db.models import Message
from app.tokens.counter import text_of

__all__ = ["CompactionWindow", "render_transcript", "select_window"]

_MESSAGE_CHARS = 4000


@dataclass(frozen=True, slots=True)
class CompactionWindow:
    """Whole turns [first_turn, last_turn] to summarize; the boundary moves to ``end_*``."""

    first_turn: int
    last_turn: int
    first_sequence: int
    start_tokens: int
    end_tokens: int
    end_sequence: int
    tokens: int
    turns: int


def select_window(
    turns: list[TurnSpan],
    *,
    tail_turns: int,
    current_stored: bool,
    max_tokens: int,
    end_tokens: int,
    end_sequence: int,
) -> CompactionWindow | None:
    """The oldest whole turns older than the raw tail, up to ``max_tokens`` (at least one).

    ``turns`` is the raw region, oldest first. The tail is the newest ``tail_turns`` turns, not
    counting the current one when it is already stored (a tool-result continuation).
    """
    keep = tail_turns + (1 if current_stored else 0)
    candidates = turns[: max(0, len(turns) - keep)]
    if not candidates:
        return None
    chosen: list[TurnSpan] = []
    tokens = 0
    for span in candidates:
        if chosen and tokens + span.tokens > max_tokens:
            break
        chosen.append(span)
        tokens += span.tokens
    following = turns[len(chosen)] if len(chosen) < len(turns) else None
    return CompactionWindow(
        first_turn=chosen[0].turn,
        last_turn=chosen[-1].turn,
        first_sequence=chosen[0].first_sequence,
        start_tokens=chosen[0].start_tokens,
        end_tokens=following.start_tokens if following else end_tokens,
        end_sequence=following.first_sequence if following else end_sequence,
        tokens=tokens,
        turns=len(chosen),
    )


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + " …"


def render_transcript(messages: list[Message]) -> str:
    """The raw turns as the summarizer reads them, one line per message or tool call."""
    lines: list[str] = []
    for message in messages:
        prefix = f"[turn {message.turn_number}] {message.role}"
        content = text_of(message.content)
        if message.role == "tool":
            lines.append(f"{prefix} result for {message.tool_call_id}: {_clip(content)}")
            continue
        if content:
            lines.append(f"{prefix}: {_clip(content)}")
        for call in message.tool_calls or []:
            function = call.get("function") or {}
            arguments = _clip(str(function.get("arguments", "")))
            lines.append(f"{prefix} calls {function.get('name')}({arguments}) as {call.get('id')}")
    return "\n".join(lines)
