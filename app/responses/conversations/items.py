"""Stored messages as Conversations-API items (Responses item shapes), and the items' ids.

One stored message is one item or several: an assistant message becomes its reasoning item,
its message item and one ``function_call`` item per tool call; a tool message is a
``function_call_output``. An item produced as a Response's output keeps the id the client saw
there (``response_items``); every other item's id is derived from its stored message and its
place among that message's items (``msg_cg<message>_<position>``), so it is stable and names
one stored message without a lookup table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

from app.conversations.fields import StoredContent
from app.db.models import Message
from app.llm.responses_items import input_part
from app.responses.output import function_call_item, message_item, reasoning_item
from app.tokens.counter import text_of
from app.wire.chat import ThinkingBlockParam, ToolCall
from app.wire.responses import (
    FunctionCallOutputItem,
    InputContentPart,
    ItemStatus,
    OutputItem,
)

__all__ = ["DELETED", "Item", "StoredItem", "derived_id", "message_items", "parse_derived_id"]

Item = OutputItem | FunctionCallOutputItem

# A stored message the user deleted through the Conversations API: kept, never sent again.
DELETED = "deleted"

_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
}
_DERIVED = re.compile(r"^(?:msg|fc|fco|rs)_cg(\d+)_(\d+)$")


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One item of a stored message."""

    item: Item
    message_id: int  # the stored message's row id
    sequence_number: int
    position: int


def derived_id(kind: str, message_id: int, position: int) -> str:
    return f"{_PREFIXES.get(kind, 'item')}_cg{message_id}_{position}"


def parse_derived_id(item_id: str) -> tuple[int, int] | None:
    """(message row id, position) of a derived item id; None for any other id."""
    match = _DERIVED.match(item_id)
    return (int(match[1]), int(match[2])) if match else None


def _input_content(content: StoredContent) -> list[InputContentPart]:
    if isinstance(content, list):
        return [input_part(part) for part in content]
    return [{"type": "input_text", "text": text_of(content)}]


def _bodies(row: Message) -> list[Item]:
    """The message's items, without ids."""
    status: ItemStatus = "incomplete" if row.status == "incomplete" else "completed"
    if row.role == "assistant":
        items: list[Item] = []
        blocks = cast(list[ThinkingBlockParam] | None, row.thinking_blocks)  # stored JSON
        if row.reasoning_content or blocks:
            items.append(reasoning_item("", row.reasoning_content, blocks))
        text = text_of(row.content)
        if text:
            items.append(message_item("", text, status))
        for call in cast(list[ToolCall], row.tool_calls or []):
            items.append(function_call_item("", call, status))
        return items
    if row.role == "tool":
        output = row.content if isinstance(row.content, str) else _input_content(row.content)
        return [
            {
                "id": "",
                "type": "function_call_output",
                "call_id": row.tool_call_id or "",
                "output": output,
                "status": "completed",
            }
        ]
    return [
        {
            "id": "",
            "type": "message",
            "role": row.role,
            "status": "completed",
            "content": _input_content(row.content),
        }
    ]


def message_items(row: Message, recorded: list[str] | None = None) -> list[StoredItem]:
    """The items of one stored message; ``recorded``: the ids its Response gave them."""
    bodies = _bodies(row)
    ids = recorded if recorded is not None and len(recorded) == len(bodies) else None
    found: list[StoredItem] = []
    for position, body in enumerate(bodies):
        body["id"] = ids[position] if ids else derived_id(body["type"], row.id, position)
        found.append(StoredItem(body, row.id, row.sequence_number, position))
    return found
