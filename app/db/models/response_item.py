"""Where an output item of a stored Response lives: its id (``msg_…``, ``fc_…``, ``rs_…``) →
the response and the stored message it belongs to. Lets a later request name the item by id
(``item_reference``) and lets the conversation list it under the id the client saw."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, utcnow

__all__ = ["ResponseItem"]


class ResponseItem(Base):
    __tablename__ = "response_items"
    __table_args__ = (
        Index("ix_response_items_conversation", "conversation_id", "sequence_number"),
    )

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64))
    response_id: Mapped[str] = mapped_column(String(40))
    conversation_id: Mapped[str] = mapped_column(String(40))
    # The stored assistant message the item renders (its sequence in the conversation), and
    # the item's place among that message's items (reasoning, message, function calls).
    sequence_number: Mapped[int]
    position: Mapped[int]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
