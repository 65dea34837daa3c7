"""The embedding of one stored message, for message recall (app/recall/search.py).

A side table one-to-one with ``messages`` (deleted with it): it carries the request's ``user``,
which messages do not, so a user's other conversations can be searched without ever crossing
to another user or tenant. ``id`` grows with every insert, so a process can cache a
conversation's vectors and load only the rows added since.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base

__all__ = ["MessageVector"]


class MessageVector(Base):
    __tablename__ = "message_vectors"
    __table_args__ = (
        Index("ix_message_vectors_conversation", "conversation_id", "id"),
        Index("ix_message_vectors_tenant_user", "tenant_id", "user_id", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), unique=True
    )
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    tenant_id: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str | None] = mapped_column(String(200), default=None)
    sequence_number: Mapped[int]
    turn_number: Mapped[int]
    role: Mapped[str] = mapped_column(String(20))
    # Little-endian float32 unit vector; NULL when the message has no text to embed.
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
    embedding_model: Mapped[str | None] = mapped_column(String(200), default=None)
    created_at: Mapped[datetime]
