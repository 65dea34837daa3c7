"""An inspector (/ui) session: the cookie holds a random token, this row its hash."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, utcnow

__all__ = ["UiSession"]


class UiSession(Base):
    __tablename__ = "ui_sessions"

    # sha256 hex of the cookie's token; the token itself is never stored.
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # Which master key opened it (an HMAC): rotating the master key ends every session.
    master_fingerprint: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(index=True)
