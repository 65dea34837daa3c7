"""A chat request made with an ``Idempotency-Key`` header, and its stored answer."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, utcnow

__all__ = ["IdempotencyRecord"]


class IdempotencyRecord(Base):
    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("tenant_id", "idempotency_key"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str] = mapped_column(String(255))
    # sha256 of the request body: the same key with another body is a client error.
    request_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # pending | done
    status_code: Mapped[int | None] = mapped_column(default=None)
    media_type: Mapped[str | None] = mapped_column(String(64), default=None)
    headers: Mapped[dict[str, str] | None] = mapped_column(JSON, default=None)
    body: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
