"""Stage 1 of a turn, the parts that read the request: what the prompt owner compares with its
ledger (the request's own system prompt, its attachments) and what this call brings after the
stored conversation (``continuation``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import orjson

from app.context.budget import TokenBudget
from app.context.cache_policy import CachePolicy
from app.context.history import TurnShape
from app.conversations.messages import ConversationMessage
from app.conversations.service import ResolvedConversation
from app.protocol.chat import ChatCompletionRequest
from app.state import AppState
from app.tokens.counter import REPLY_PRIMER
from app.turns.context import TurnContext
from app.turns.owner import Continuation, Ledger
from app.wire.chat import ChatMessage

__all__ = [
    "TurnRead",
    "attachments_key",
    "continuation",
    "leading_system",
    "own_system_prompt",
]


@dataclass(frozen=True, slots=True)
class TurnRead:
    """Stage 1's result, read once and handed to every later stage: the conversation the turn
    continues, its new messages (numbered), their shape, the request's own system prompt, the
    budget and the cache policy. ``measured`` gives the read with the budget's slices that the
    turn's shape alone says; later stages return their own budget (memory and the rewritten
    turn: ``Loaded.budget``, ``EngineResult.budget``) and never change this one."""

    resolved: ResolvedConversation
    new: list[ConversationMessage]
    shape: TurnShape
    own_system: ConversationMessage | None
    budget: TokenBudget
    policy: CachePolicy

    def measured(self) -> TurnRead:
        """This read with the budget's slices from the turn's shape alone: the system prompt
        (the request's own included) and the current turn; nothing for memory yet."""
        shape, system = self.shape, self.shape.system_tokens
        if self.own_system is not None:
            system += self.own_system.token_count
        budget = self.budget.with_system(system).with_current(shape.current_tokens)
        return replace(self, budget=budget.with_memory(0))


def continuation(
    read: TurnRead,
    ledger: Ledger | None,
    own_hash: str,
    attachments_key: str,
    *,
    asked_to_rebase: bool,
) -> Continuation:
    resolved, new, budget = read.resolved, read.new, read.budget
    conversation = resolved.conversation
    newest = conversation.message_count - 1 if conversation is not None else -1
    return Continuation(
        newest_sequence=newest,
        continues_at_end=resolved.at is None or resolved.at == newest + 1,
        own_system_hash=own_hash,
        attachments_key=attachments_key,
        tail_tokens=(ledger.answer_tokens if ledger else 0) + sum(m.token_count for m in new),
        fixed_tokens=REPLY_PRIMER + budget.tools,
        asked_to_rebase=asked_to_rebase,
    )


def attachments_key(request: ChatCompletionRequest) -> str:
    if not request.attachments:
        return ""
    encoded = orjson.dumps([a.model_dump(mode="json") for a in request.attachments])
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()


def leading_system(messages: list[ChatMessage]) -> int:
    count = 0
    while count < len(messages) and messages[count].get("role") in ("system", "developer"):
        count += 1
    return count


async def own_system_prompt(
    state: AppState, context: TurnContext, incoming: list[ChatMessage]
) -> ConversationMessage | None:
    """Take the request's own system prompt out of what is stored (``own_system_prompt``):
    it is sent first, before the stored conversation, for this request only. A large one is
    counted in the token pool, as the new messages are."""
    if not context.own_system_prompt or not incoming or incoming[0]["role"] != "system":
        return None
    message = incoming.pop(0)
    model = context.request.model
    await state.tokens.precount_messages([message], model)
    count = state.tokens.count_message(message, model)
    return ConversationMessage(**message, token_count=count, stored=False)
