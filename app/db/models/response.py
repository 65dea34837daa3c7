"""A stored Response (``POST /v1/responses`` with ``store``): where it ends in its conversation,
what it answered, and what it echoes of its request."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, utcnow
from app.wire.json import JSONObject
from app.wire.responses import ResponseOutput, ResponsesUsage

__all__ = ["ResponseRecord"]


class ResponseRecord(Base):
    __tablename__ = "responses"
    __table_args__ = (Index("ix_responses_tenant_created", "tenant_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64))
    conversation_id: Mapped[str] = mapped_column(String(40))
    # The conversation's messages [0, end_sequence) are this response's whole context: its
    # answer is the message at end_sequence - 1. Continuing from here is a branch when the
    # conversation has grown past it.
    end_sequence: Mapped[int]
    model: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))  # completed | incomplete | failed
    output: Mapped[list[ResponseOutput]] = mapped_column(JSON)
    usage: Mapped[ResponsesUsage | None] = mapped_column(JSON)
    # wire.responses InputItem each: app/responses reads them as plain dicts for now.
    input_items: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    # The request fields a Response repeats (instructions, tools, metadata, …).
    echo: Mapped[JSONObject] = mapped_column(JSON)  # the request's fields, repeated as given
    incomplete_reason: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
