"""The stored messages a request's history window loads (app/context/history.py decides the
cut; this reads from it on, through the repository, or from the rows this process keeps of a
short conversation: app/conversations/tail_cache.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.messages import (
    HISTORY_COLUMNS,
    ConversationMessage,
    HistoryColumns,
    from_history_row,
)
from app.conversations.repository import conversation_repository
from app.conversations.tail_cache import stamp_of, tail_cache
from app.db.models import Conversation

__all__ = ["stored_tail"]

# Positions in a ``HISTORY_COLUMNS`` row (literal, so a row's column keeps its type).
_SEQUENCE: Final = 8
_TURN: Final = 9
_START: Final = 11
_STATUS: Final = 12
assert [HISTORY_COLUMNS[i] for i in (_SEQUENCE, _TURN, _START, _STATUS)] == [
    "sequence_number",
    "turn_number",
    "start_tokens",
    "status",
]


async def stored_tail(
    session: AsyncSession,
    conversation: Conversation,
    *,
    system_count: int,
    cut: int,
    min_turn: int | None,
    first_sequence: int,
) -> list[ConversationMessage]:
    """The system prompt and the messages from absolute token position ``cut`` on (whole
    turns from ``min_turn`` on, see ``context_messages``)."""
    rows: Sequence[HistoryColumns]
    if tail_cache.fits(conversation):
        stamp = stamp_of(conversation)
        rows = tail_cache.rows(conversation.tenant_id, conversation.id, stamp)
        if not rows:  # every stored row, in the one statement the tail would have taken
            rows = await conversation_repository.messages_from(session, conversation.id, 0)
            tail_cache.put(conversation.tenant_id, conversation.id, stamp, rows)
        rows = _window(rows, system_count, cut, min_turn, first_sequence)
    else:
        rows = await conversation_repository.context_messages(
            session,
            conversation.id,
            system_count=system_count,
            cut=cut,
            min_turn=min_turn,
            first_sequence=first_sequence,
        )
    # A message deleted through the Conversations API is kept, never sent again.
    return [from_history_row(row) for row in rows if row[_STATUS] != "deleted"]


def _window(
    rows: Sequence[HistoryColumns],
    system_count: int,
    cut: int,
    min_turn: int | None,
    first_sequence: int,
) -> list[HistoryColumns]:
    """The rows ``context_statement`` selects, from every row of the conversation in order."""
    return [
        row
        for row in rows
        if row[_SEQUENCE] < system_count
        or row[_START] >= cut
        or (min_turn is not None and row[_TURN] >= min_turn and row[_SEQUENCE] >= first_sequence)
    ]
