"""Stored conversation messages as the storage tests build them: two tenants, one model, a
first turn, and an append through the service."""

from __future__ import annotations

from typing import Any

from app.conversations.fingerprint import content_hash
from app.conversations.messages import ConversationMessage
from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.core.database import Database
from app.db.models import Conversation
from app.tokens.counter import TokenCounter

__all__ = ["MODEL", "OTHER", "TENANT", "TURN", "append", "message"]

TENANT = "tenant-a"
OTHER = "tenant-b"
MODEL = "gpt-4o-mini"
_counter = TokenCounter()


def message(role: str, content: Any = None, **extra: Any) -> ConversationMessage:
    data = {"role": role, "content": content, **extra}
    return ConversationMessage(
        **data,
        token_count=_counter.count_message(data, MODEL),
        content_hash=content_hash(data),
    )


async def append(
    db: Database, conversation_id: str, messages: list[ConversationMessage], tenant: str = TENANT
) -> Conversation:
    async with db.writing() as session:
        return await conversation_service.append(
            session, tenant, conversation_id, messages, Stamp(MODEL)
        )


TURN = [
    message("system", "be brief"),
    message("user", "hello"),
    message("assistant", "Echo: hello"),
]
