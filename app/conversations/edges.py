"""What a continuing turn needs to know of a conversation's stored ends, remembered per process.

A request that continues a conversation by id compares its messages with the stored system
prompt and the last stored messages (``new_messages_start``), and a tool result finds the turn
of the call it answers (``tool_call_turns``): each a SELECT. The process that stored a turn
already knows both, so it keeps them here, keyed by the conversation's chain hash
(``head_hash``): the conversation row every request reads anyway says whether they still
describe it. Another worker's turn moves the head, and the next request reads them again. So a
continued request costs the same statements at 10 and at 10,000 stored messages, and one fewer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.conversations.rows import MessageRow

__all__ = ["EdgeCache", "Edges"]

TAIL = 32  # content hashes of the last stored messages kept (and read when not kept)
CALLS = 64  # tool calls of the last stored assistant messages kept
_ENTRIES = 4096


@dataclass(slots=True)
class Edges:
    head: str  # the chain hash of the sequence these describe
    system: list[str] | None  # content hashes of the stored system prompt (None: not known)
    tail: list[str]  # content hashes of the last len(tail) stored messages, oldest first
    calls: dict[str, int] = field(default_factory=dict)  # tool call id -> its turn


class EdgeCache:
    """(tenant, conversation) -> ``Edges``, least recently used out."""

    def __init__(self, size: int = _ENTRIES) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str], Edges] = OrderedDict()

    def get(self, tenant_id: str, conversation_id: str, head: str) -> Edges | None:
        """The ends of the conversation whose stored sequence has chain hash ``head``."""
        found = self._entries.get((tenant_id, conversation_id))
        if found is None or found.head != head:
            return None
        self._entries.move_to_end((tenant_id, conversation_id))
        return found

    def put(self, tenant_id: str, conversation_id: str, edges: Edges) -> None:
        edges.tail = edges.tail[-TAIL:]
        self._entries[(tenant_id, conversation_id)] = edges
        self._entries.move_to_end((tenant_id, conversation_id))
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def appended(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        before: str,
        before_count: int,
        system_count: int,
        rows: Sequence[MessageRow],
    ) -> None:
        """``rows`` (as stored) went after the sequence whose chain hash is ``before``
        (``before_count`` messages); ``system_count``: the stored system prompt's length now.
        What was known of the ends before is extended; else the rows alone are the tail."""
        if not rows:
            return
        if before_count == 0:
            known: Edges | None = Edges(before, [], [])
        else:
            known = self.get(tenant_id, conversation_id, before)
        if known is None:
            known = Edges(before, None, [])
        if known.system is not None and len(known.system) < system_count:
            known.system = known.system + [
                r["content_hash"] for r in rows if r["sequence_number"] < system_count
            ]
            if len(known.system) != system_count:
                known.system = None
        known.tail = known.tail + [r["content_hash"] for r in rows]
        for row in rows:
            if row["role"] == "assistant":
                for call in row["tool_calls"] or []:
                    known.calls[str(call.get("id"))] = row["turn_number"]
        while len(known.calls) > CALLS:
            known.calls.pop(next(iter(known.calls)))
        known.head = rows[-1]["chain_hash"]
        self.put(tenant_id, conversation_id, known)
