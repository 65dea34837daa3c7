"""A long-term memory of one user (within a tenant): typed, weighted, dated, superseded not lost."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, Index, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, new_id, utcnow

__all__ = ["Memory"]


class Memory(Base):
    __tablename__ = "memories"
    __table_args__ = (
        Index("ix_memories_tenant_user", "tenant_id", "user_id", "superseded_by"),
        Index("ix_memories_tenant_user_key", "tenant_id", "user_id", "key"),
        # Covers the retrieval cache's (count, latest update) signature without reading rows.
        Index("ix_memories_signature", "tenant_id", "user_id", "superseded_by", "updated_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("mem"))
    tenant_id: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str] = mapped_column(String(200))
    content: Mapped[str] = mapped_column(Text)
    # A key/value fact (POST /v1/memories with key and value): one active value per key and
    # user; a new value supersedes the old one. None for free-text memories.
    key: Mapped[str | None] = mapped_column(String(200), default=None)
    memory_type: Mapped[str] = mapped_column(String(20), default="note")
    importance: Mapped[int] = mapped_column(default=5)
    confidence: Mapped[float] = mapped_column(Float, default=1.0)
    # "api", or "extraction" (with the conversation it came from)
    source: Mapped[str] = mapped_column(String(20), default="api")
    conversation_id: Mapped[str | None] = mapped_column(String(40), default=None)
    # The vector as float32 little-endian bytes (app.embedders.embedder.encode_vector), of the
    # model named in embedding_model; None until computed (retrieval does it lazily).
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
    embedding_model: Mapped[str | None] = mapped_column(String(200), default=None)
    # Set when a newer memory contradicts this one; superseded memories are not retrieved.
    superseded_by: Mapped[str | None] = mapped_column(String(40), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
