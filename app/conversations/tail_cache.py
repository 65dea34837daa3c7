"""A short conversation's stored messages, remembered per process.

A request that continues a conversation by id reads its stored history back (``stored_tail``)
in the same read transaction as the conversation row: one SELECT of every column of its recent
messages, and a Python object for each value. The process that stored the last turn already
holds those rows, so it keeps them here, for conversations of at most ``ROWS`` messages and
``CONVERSATION_BYTES`` (a chat, not an agent's tool loop), ``TOTAL_BYTES`` in all, keyed by
the conversation's ``TailStamp``: its message count, chain hash and ``updated_at`` as the
conversation row says. Every change to a conversation's messages moves one of them (an append
the first two, hiding an item through the Conversations API the last), so the row every
request reads anyway says whether the rows kept still are the stored ones, in any worker.

Rows are kept as ``HISTORY_COLUMNS`` tuples with their JSON values serialized, so a request
that changes the messages it builds from them never changes what the next request reads.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

import orjson

from app.conversations.messages import HISTORY_COLUMNS, HistoryColumns

if TYPE_CHECKING:
    from app.conversations.rows import MessageRow
    from app.db.models import Conversation

__all__ = ["ROWS", "TailCache", "TailStamp", "stamp_of", "tail_cache", "tail_stamp"]

ROWS = 256  # a conversation with more stored messages is read from the database every time
CONVERSATION_BYTES = 256 * 1024  # the same for one whose stored text is larger
TOTAL_BYTES = 1024 * 1024  # all conversations kept (~40 chats of 25 turns), oldest use out
# What a kept row costs beside its text: the tuple and each value's object header (a chat
# turn's row is ~130 bytes of text and ~530 in memory, tracemalloc says).
_ROW_OVERHEAD = 400
_JSON_AT = tuple(
    HISTORY_COLUMNS.index(name) for name in ("content", "tool_calls", "thinking_blocks")
)


@dataclass(frozen=True, slots=True)
class TailStamp:
    """What the conversation row says of its messages."""

    message_count: int
    head_hash: str
    updated_at: datetime | None


def _instant(value: datetime | None) -> datetime | None:
    """Naive UTC, as SQLite gives it back and PostgreSQL does not."""
    if value is not None and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def tail_stamp(message_count: int, head_hash: str, updated_at: datetime | None) -> TailStamp:
    return TailStamp(message_count, head_hash, _instant(updated_at))


def stamp_of(conversation: Conversation) -> TailStamp:
    return tail_stamp(conversation.message_count, conversation.head_hash, conversation.updated_at)


# A kept row: the tuple with its JSON values as serialized bytes (``None`` stays ``None``).
_Kept = tuple[object, ...]


class _TooBig(Exception):
    pass


def _keep(row: Sequence[object]) -> tuple[_Kept, int]:
    """A row as kept, and about how many bytes its text takes."""
    kept = list(row)
    size = _ROW_OVERHEAD
    for value in kept:
        if isinstance(value, str):
            size += len(value)
    for at in _JSON_AT:
        value = kept[at]
        if isinstance(value, list | dict):
            try:
                serialized = orjson.dumps(value)
            except TypeError as exc:  # not what the database would store as is
                raise _TooBig from exc
            kept[at] = serialized
            size += len(serialized)
    return tuple(kept), size


def _thaw(kept: _Kept) -> HistoryColumns:
    """A kept row as ``execute_core`` gives it: fresh lists each time."""
    row = list(kept)
    for at in _JSON_AT:
        value = row[at]
        if isinstance(value, bytes):
            row[at] = orjson.loads(value)
    return cast("HistoryColumns", tuple(row))


@dataclass(slots=True)
class _Entry:
    stamp: TailStamp
    rows: list[_Kept]
    size: int


class TailCache:
    """(tenant, conversation) -> its stored rows for one ``TailStamp``."""

    def __init__(self, total_bytes: int = TOTAL_BYTES) -> None:
        self._total_bytes = total_bytes
        self._size = 0
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()

    @staticmethod
    def fits(conversation: Conversation) -> bool:
        """Whether a conversation is short enough to be kept (its stored tokens stand for
        its text: a token is a few bytes)."""
        return (
            conversation.message_count <= ROWS
            and conversation.total_tokens * 4 <= CONVERSATION_BYTES
        )

    def rows(self, tenant_id: str, conversation_id: str, stamp: TailStamp) -> list[HistoryColumns]:
        """Every stored row of the conversation, in order, if kept for ``stamp``; else []."""
        entry = self._entries.get((tenant_id, conversation_id))
        if entry is None or entry.stamp != stamp:
            return []
        self._entries.move_to_end((tenant_id, conversation_id))
        return [_thaw(kept) for kept in entry.rows]

    def put(
        self,
        tenant_id: str,
        conversation_id: str,
        stamp: TailStamp,
        rows: Sequence[Sequence[object]],
    ) -> None:
        """Keep every stored row of the conversation (as read for ``stamp``)."""
        try:
            kept = [_keep(row) for row in rows]
        except _TooBig:
            self.forget(tenant_id, conversation_id)
            return
        self._store(
            (tenant_id, conversation_id),
            _Entry(stamp, [row for row, _ in kept], sum(size for _, size in kept)),
        )

    def appended(
        self,
        tenant_id: str,
        conversation_id: str,
        *,
        before: TailStamp,
        after: TailStamp,
        rows: Sequence[MessageRow],
    ) -> None:
        """``rows`` (as written) went after the sequence ``before`` describes, which now reads
        ``after``. Rows kept for ``before`` are extended; else nothing is kept."""
        key = (tenant_id, conversation_id)
        entry = self._entries.get(key)
        if before.message_count == 0:
            entry = _Entry(before, [], 0)
        if entry is None or entry.stamp != before or after.message_count > ROWS:
            self.forget(tenant_id, conversation_id)
            return
        try:
            kept = [
                _keep([cast(Mapping[str, object], row)[name] for name in HISTORY_COLUMNS])
                for row in rows
            ]
        except _TooBig:
            self.forget(tenant_id, conversation_id)
            return
        size = entry.size + sum(size for _, size in kept)
        self._store(key, _Entry(after, entry.rows + [row for row, _ in kept], size))

    def forget(self, tenant_id: str, conversation_id: str) -> None:
        entry = self._entries.pop((tenant_id, conversation_id), None)
        if entry is not None:
            self._size -= entry.size

    def _store(self, key: tuple[str, str], entry: _Entry) -> None:
        self.forget(*key)
        if entry.size > CONVERSATION_BYTES:
            return
        self._entries[key] = entry
        self._size += entry.size
        while self._size > self._total_bytes:
            _, dropped = self._entries.popitem(last=False)
            self._size -= dropped.size


tail_cache = TailCache()
