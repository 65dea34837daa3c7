"""Expanding a compaction item sent back: everything before it stands for the stored
conversation it names (compaction_items.py); the turn continues that conversation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from sqlalchemy.ext.asyncio import AsyncSession

from app.compaction.repository import summary_repository
from app.conversations.fingerprint import content_hash
from app.conversations.messages import STORED_KEYS
from app.conversations.repository import conversation_repository
from app.core.deps import Storage
from app.core.errors import BadRequest
from app.responses.compaction_items import CompactionItem
from app.responses.compaction_seal import SealedCompaction, open_seal
from app.responses.schemas import ResponsesRequest
from app.wire.chat import ChatMessage

__all__ = ["Expansion", "expand_compaction"]


@dataclass(slots=True)
class Expansion:
    """A request whose (latest) compaction item is expanded: ``body`` continues the stored
    conversation with the input items after that item."""

    body: ResponsesRequest
    sealed: SealedCompaction
    resent: ChatMessage | None = None  # nothing after the item: the last stored message

    @property
    def note(self) -> str:
        return (
            f"compaction item expanded: conversation {self.sealed.conversation_id} "
            f"(compacted at {self.sealed.upto} messages) with its summaries and raw history"
        )


async def expand_compaction(
    storage: Storage, tenant_id: str, body: ResponsesRequest
) -> Expansion | None:
    """The request continuing the stored conversation its last compaction item stands for,
    checked: a 400 for an item that is not contextgate's for this caller, or whose
    conversation is gone. None without a compaction item."""
    items = body.input if isinstance(body.input, list) else []
    positions = [i for i, item in enumerate(items) if isinstance(item, CompactionItem)]
    if not positions:
        return None
    index = positions[-1]
    item = items[index]
    assert isinstance(item, CompactionItem)
    param = f"input.{index}.encrypted_content"
    sealed = open_seal(storage.settings, tenant_id, item.encrypted_content, param)
    if body.conversation_id is not None and body.conversation_id != sealed.conversation_id:
        raise BadRequest(
            "The compaction item belongs to another conversation than conversation_id.",
            param="conversation_id",
            code="invalid_compaction_item",
        )
    after = items[index + 1 :]
    update = {"input": after, "conversation_id": sealed.conversation_id}
    expansion = Expansion(body.model_copy(update=update), sealed)
    async with storage.database.reading() as session:
        conversation = await conversation_repository.get(session, tenant_id, sealed.conversation_id)
        if conversation is None or conversation.message_count < sealed.upto:
            raise BadRequest(
                "The conversation this compaction item stands for was deleted.",
                param=param,
                code="invalid_compaction_item",
            )
        if not after:  # compacted inside a tool loop: go on from the stored end
            expansion.resent = await _last_message(
                session, conversation.id, conversation.message_count
            )
    return expansion


async def _last_message(
    session: AsyncSession, conversation_id: str, count: int
) -> ChatMessage | None:
    """The conversation's last message as a client resends it (deduplicated on arrival)."""
    rows = await summary_repository.messages_between(
        session, conversation_id, first_sequence=count - 1, first_turn=0, last_turn=2**31 - 1
    )
    if not rows:
        return None
    row = rows[-1]
    message = {key: getattr(row, key) for key in STORED_KEYS}
    message = {key: value for key, value in message.items() if value is not None}
    return cast(ChatMessage, message) if content_hash(message) == row.content_hash else None
