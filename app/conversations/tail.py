"""The stored messages a request's history window loads (app/context/history.py decides the
cut; this reads from it on, through the repository)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.messages import HISTORY_COLUMNS, ConversationMessage, from_history_row
from app.conversations.repository import conversation_repository

__all__ = ["stored_tail"]

_STATUS = HISTORY_COLUMNS.index("status")


async def stored_tail(
    session: AsyncSession,
    conversation_id: str,
    *,
    system_count: int,
    cut: int,
    min_turn: int | None,
    first_sequence: int,
) -> list[ConversationMessage]:
    """The system prompt and the messages from absolute token position ``cut`` on (whole
    turns from ``min_turn`` on, see ``context_messages``)."""
    rows = await conversation_repository.context_messages(
        session,
        conversation_id,
        system_count=system_count,
        cut=cut,
        min_turn=min_turn,
        first_sequence=first_sequence,
    )
    # A message deleted through the Conversations API is kept, never sent again.
    return [from_history_row(row) for row in rows if row[_STATUS] != "deleted"]
