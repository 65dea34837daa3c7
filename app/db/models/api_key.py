"""A virtual API key: its own tenant, stored only as a peppered hash."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, new_id, utcnow

__all__ = ["ApiKey"]


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("key"))
    # sha256 hex of the key with a server-side pepper; the key itself is never stored.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # The first characters of the key ("sk-cg-ab12…"), enough for a person to recognise it.
    key_prefix: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(200))
    tenant_id: Mapped[str] = mapped_column(String(64))
    max_budget: Mapped[float | None] = mapped_column(default=None)
    rpm_limit: Mapped[int | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    # After it the key answers 401 (None: never).
    expires_at: Mapped[datetime | None] = mapped_column(default=None)
