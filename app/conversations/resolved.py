"""What ``ConversationService.resolve`` answers, and the conflict it may raise."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import Conflict
from app.db.models import Conversation, ConversationSummaryRow, PromptLedgerRow

__all__ = ["HeadMoved", "ResolvedConversation"]


class HeadMoved(Conflict):
    """The conversation grew past the position a turn must continue from (``at``): another
    turn was stored there since. The caller branches off at ``at`` instead."""

    def __init__(self, conversation_id: str, at: int) -> None:
        super().__init__(
            "The conversation moved on while this request was starting; retry it.",
            code="conversation_moved",
        )
        self.conversation_id = conversation_id
        self.at = at


@dataclass(slots=True)
class ResolvedConversation:
    conversation_id: str
    conversation: Conversation | None  # None: a new conversation, created when stored
    new_start: int  # incoming[new_start:] are the messages not stored yet
    # The conversation's active summaries when read with it (None: not read yet).
    summaries: list[ConversationSummaryRow] | None = None
    # Continue exactly after the first ``at`` stored messages (Responses'
    # previous_response_id): a turn stored after another one got there first goes on a branch.
    at: int | None = None
    # The prompt owner's ledger row, when read with the conversation (``ledger_read``).
    ledger_row: PromptLedgerRow | None = None
    ledger_read: bool = False

    @property
    def is_new(self) -> bool:
        return self.conversation is None
