"""One row per chat request: what was asked of which model, what it cost, how it went."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, new_id, utcnow

__all__ = ["RequestLog"]


class RequestLog(Base):
    __tablename__ = "request_logs"
    __table_args__ = (
        Index("ix_request_logs_tenant_created", "tenant_id", "created_at"),
        Index("ix_request_logs_conversation", "conversation_id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("req"))
    tenant_id: Mapped[str] = mapped_column(String(64))
    key_id: Mapped[str | None] = mapped_column(String(40))
    conversation_id: Mapped[str | None] = mapped_column(String(40))
    model: Mapped[str] = mapped_column(String(200))
    stream: Mapped[bool] = mapped_column(default=False)
    status: Mapped[str] = mapped_column(String(16))  # ok | error | incomplete
    status_code: Mapped[int] = mapped_column(default=200)
    error: Mapped[str | None] = mapped_column(Text)
    prompt_tokens: Mapped[int] = mapped_column(default=0)
    completion_tokens: Mapped[int] = mapped_column(default=0)
    prompt_cost: Mapped[float] = mapped_column(default=0.0)
    completion_cost: Mapped[float] = mapped_column(default=0.0)
    planning_cost: Mapped[float] = mapped_column(default=0.0)
    total_cost: Mapped[float] = mapped_column(default=0.0)
    latency_ms: Mapped[float] = mapped_column(default=0.0)
    context_utilization: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
