"""A conversation's running counters, advanced message by message without touching its row
(``ConversationService.append_continuing`` writes them with one guarded UPDATE)."""

from __future__ import annotations

from dataclasses import dataclass

from app.conversations.rows import CounterValues
from app.db.models import Conversation

__all__ = ["Counters"]


@dataclass(slots=True)
class Counters:
    """A conversation's running counters, advanced by ``_next_row`` without touching the row."""

    id: str
    tenant_id: str
    message_count: int
    total_tokens: int
    turn_count: int
    system_prompt_count: int
    system_prompt_tokens: int
    last_user_sequence: int | None
    last_user_start_tokens: int
    head_hash: str

    @classmethod
    def of(cls, conversation: Conversation) -> Counters:
        return cls(
            id=conversation.id,
            tenant_id=conversation.tenant_id,
            message_count=conversation.message_count,
            total_tokens=conversation.total_tokens,
            turn_count=conversation.turn_count,
            system_prompt_count=conversation.system_prompt_count,
            system_prompt_tokens=conversation.system_prompt_tokens,
            last_user_sequence=conversation.last_user_sequence,
            last_user_start_tokens=conversation.last_user_start_tokens,
            head_hash=conversation.head_hash,
        )

    def counters(self) -> CounterValues:
        return {
            "message_count": self.message_count,
            "total_tokens": self.total_tokens,
            "turn_count": self.turn_count,
            "system_prompt_count": self.system_prompt_count,
            "system_prompt_tokens": self.system_prompt_tokens,
            "last_user_sequence": self.last_user_sequence,
            "last_user_start_tokens": self.last_user_start_tokens,
            "head_hash": self.head_hash,
        }
