"""What ``prepare`` hands the rest of a turn: the messages that go upstream, the conversation
they continue, and what is stored with the answer (app/turns/pipeline.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.context.metadata import ContextUtilization
from app.conversations.cache_state import CacheState
from app.conversations.messages import ConversationMessage
from app.conversations.service import ResolvedConversation
from app.keys.caller import Caller
from app.protocol.chat import ChatCompletionRequest
from app.turns.owner import PromptRecord
from app.wire.chat import ChatMessage

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from app.llm.responses import Usage

__all__ = ["Prepared", "RecordHook"]

# Called in the transaction that stores a turn, after its messages (the answer has its
# sequence_number): a door stores what it keeps beside the conversation, atomically with it.
RecordHook = Callable[
    ["AsyncSession", "Prepared", "ConversationMessage", "Usage | None"], Awaitable[None]
]


@dataclass(slots=True)
class Prepared:
    request: ChatCompletionRequest
    caller: Caller
    request_id: str
    started: float
    messages: list[ChatMessage]  # what goes upstream
    utilization: ContextUtilization
    resolved: ResolvedConversation | None = None  # None: context disabled, nothing stored
    new_messages: list[ConversationMessage] = field(default_factory=list)
    on_record: RecordHook | None = None  # the door's part of the turn's transaction
    cache_state: CacheState | None = None  # the cache-aware fit's state to store, if it moved
    prompt_hash: str | None = None  # of what goes upstream, stored with the answer (seal.py)
    # The door's provider headers (TurnContext.upstream_headers), for every upstream call.
    upstream_headers: Mapping[str, str] = field(default_factory=dict)
    # The prompt as sent (marks aside), stored with the answer as the owner's ledger.
    prompt: PromptRecord | None = None

    @property
    def conversation_id(self) -> str | None:
        return self.resolved.conversation_id if self.resolved else None
