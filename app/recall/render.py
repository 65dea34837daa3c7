"""A recalled message, and the block that carries the recalled messages to the model.

Every quoted text has contextgate's delimiters escaped (app/core/delimiters.py): it can neither
close the block nor forge another. A message is on one line; a tool result's lines are
indented, so no quoted line can start an item or a role turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.core.delimiters import escape_delimiters

__all__ = ["RECALL_FOOTER", "RECALL_HEADER", "Recalled", "render_recalled"]

RECALL_HEADER = (
    "[RECALLED: earlier messages no longer in this conversation's history, most similar first]"
)
RECALL_FOOTER = "[/RECALLED]"


@dataclass(frozen=True, slots=True)
class Recalled:
    message_id: int
    conversation_id: str
    sequence_number: int
    turn_number: int
    role: str
    similarity: float
    text: str
    created_at: datetime
    tool_call_id: str | None = None
    tool_name: str | None = None

    def report(self) -> dict[str, Any]:
        found = {
            "sequence_number": self.sequence_number,
            "turn_number": self.turn_number,
            "conversation_id": self.conversation_id,
            "similarity": round(self.similarity, 4),
            "role": self.role,
        }
        if self.role == "tool":
            found |= {"tool_call_id": self.tool_call_id, "tool_name": self.tool_name}
        return found


def _stamp(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _item(item: Recalled, conversation_id: str) -> str:
    """One recalled message: its header, then its text escaped. A message is on one line; a
    tool result's lines are indented, so no quoted line can start an item or a role turn."""
    where = "" if item.conversation_id == conversation_id else "another conversation, "
    text = escape_delimiters(item.text)
    if item.role != "tool":
        return f"- ({where}turn {item.turn_number}, {_stamp(item.created_at)}, {item.role}) {text}"
    name, call = (
        escape_delimiters(" ".join((v or "?").split())) for v in (item.tool_name, item.tool_call_id)
    )
    head = (
        f"- (turn {item.turn_number}, {_stamp(item.created_at)}, result of tool '{name}', "
        f"call {call}, cleared from this prompt):"
    )
    return "\n".join([head, *("  " + line for line in text.split("\n"))])


def render_recalled(recalled: Sequence[Recalled], conversation_id: str) -> str:
    return "\n".join(
        [RECALL_HEADER, *(_item(item, conversation_id) for item in recalled), RECALL_FOOTER]
    )
