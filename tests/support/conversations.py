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

__all__ = ["MODEL", "OTHER", "TENANT", "TURN", "append", "message", "message_row"]

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


def message_row(
    conversation_id: str, tenant_id: str, sequence: int, role: str = "user", **columns: object
) -> dict[str, object]:
    """A whole ``messages`` row as the hot path inserts it (app/conversations/rows.py
    ``MessageRow``): every column but the id and ``created_at``; ``columns`` override."""
    row: dict[str, object] = {
        "conversation_id": conversation_id,
        "tenant_id": tenant_id,
        "sequence_number": sequence,
        "turn_number": 1,
        "role": role,
        "content": f"message {sequence}",
        "name": None,
        "tool_calls": None,
        "tool_call_id": None,
        "reasoning_content": None,
        "thinking_blocks": None,
        "context_prefix": None,
        "prompt_hash": None,
        "token_count": 10,
        "start_tokens": sequence * 10,
        "chain_hash": f"chain{sequence}",
        "content_hash": f"hash{sequence}",
        "status": "complete",
        "request_id": None,
    }
    return row | columns
