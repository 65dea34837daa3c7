"""What memory adds to a turn's prompt: the compaction bundle, the per-turn block (facts,
memories, date) and recalled messages; ``apply`` puts them into the assembled messages and
reports them in ``context_utilization``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from app.context.assembler import AssembledContext
from app.context.budget import TokenBudget
from app.context.history import HistoryWindow
from app.conversations.service import ResolvedConversation
from app.keys.caller import Caller
from app.memories.retrieval import Retrieved
from app.protocol.chat import ChatCompletionRequest
from app.recall.turn import RecallResult, RecallTurn, recall_for_turn
from app.state import AppState
from app.turns.injection import inject, insert_bundle
from app.turns.memory_services import recall_services
from app.wire.json import JSONObject

__all__ = ["MemoryContext", "TurnAsked"]


class TurnAsked(Protocol):
    """What memory reads of a turn (``app.turns.context.TurnContext`` is one): the request
    and who asked."""

    @property
    def request(self) -> ChatCompletionRequest: ...

    @property
    def caller(self) -> Caller: ...


@dataclass(slots=True)
class MemoryContext:
    mode: str = "user_prefix"
    boundary_tokens: int = 0
    boundary_sequence: int = 0
    bundle: str = ""
    bundle_tokens: int = 0
    context_block: str = ""
    context_tokens: int = 0
    injected: list[Retrieved] = field(default_factory=list)
    injected_report: list[JSONObject] = field(default_factory=list)  # app/memories' report
    compaction: JSONObject | None = None  # app/compaction's report
    summarizer_cost: float = 0.0
    summarizer_calls: int = 0
    summarizer_tokens: tuple[int, int] = (0, 0)  # prompt, completion (compaction)
    notes: list[str] = field(default_factory=list)
    recall: RecallResult = field(default_factory=RecallResult)
    # In user_prefix mode, the text put before the newest user message (memories, date,
    # recalled messages): stored with that message, so later calls send the same bytes.
    user_prefix: str = ""
    # A later call of a tool loop: the block frozen with the loop's user message, sent again.
    frozen_tokens: int = 0

    @property
    def reserved_tokens(self) -> int:
        return self.bundle_tokens + self.context_tokens

    async def recall_messages(
        self,
        state: AppState,
        context: TurnAsked,
        resolved: ResolvedConversation,
        window: HistoryWindow,
        assembled: AssembledContext,
        budget: TokenBudget,
    ) -> None:
        """Message recall (app/recall/turn.py), within what the assembly left of the budget."""
        own = self.bundle_tokens + self.context_tokens
        room = min(
            state.settings.recall_token_cap, budget.total - own - assembled.utilization.tokens_used
        )
        turn = RecallTurn(
            request=context.request,
            tenant_id=context.caller.tenant_id,
            conversation=resolved.conversation,
            conversation_id=resolved.conversation_id,
            window=window,
            assembled=assembled,
            room=room,
            boundary_sequence=self.boundary_sequence,
            message_overhead=self.mode == "context_message",
        )
        services = recall_services(state)
        await recall_for_turn(services, state.settings, state.tokens, turn, self.recall)

    def apply(self, assembled: AssembledContext, budget: TokenBudget) -> None:
        """Insert the bundle, the memories and recalled messages; report them."""
        messages = assembled.messages
        added = 0
        if self.bundle:
            messages = insert_bundle(messages, self.bundle)
            added += 1
        if self.mode == "context_message":
            blocks = [(self.recall.block, "context_message"), (self.context_block, self.mode)]
        else:  # recalled messages go before the newest user message in the other modes too
            prefix = "\n\n".join(b for b in (self.context_block, self.recall.block) if b)
            if self.mode == "user_prefix":
                self.user_prefix = prefix
                blocks = [(prefix, "user_prefix")]
            else:
                blocks = [(self.recall.block, "user_prefix"), (self.context_block, self.mode)]
        for block, mode in blocks:  # per-turn context next to the newest user message
            if block:
                messages = inject(messages, block, mode)
                added += 0 if mode == "user_prefix" else 1
        assembled.messages = messages
        used = self.bundle_tokens + self.context_tokens + self.recall.tokens + self.frozen_tokens
        utilization = assembled.utilization
        utilization.max_input_tokens = budget.total
        utilization.tokens_used += used
        utilization.messages_included += added
        utilization.breakdown.memory += used
        utilization.compaction = self.compaction
        utilization.memories_injected = self.injected_report
        utilization.messages_recalled = [r.report() for r in self.recall.recalled]
        utilization.notes.extend(self.recall.notes)
        if self.summarizer_cost:
            utilization.planning_cost.summarizer_cost += self.summarizer_cost
            utilization.planning_cost.total_cost += self.summarizer_cost
        planning = utilization.planning_usage
        planning.summarizer_calls += self.summarizer_calls
        planning.summarizer_prompt_tokens += self.summarizer_tokens[0]
        planning.summarizer_completion_tokens += self.summarizer_tokens[1]
        planning.total_tokens += sum(self.summarizer_tokens)
        utilization.notes.extend(self.notes)
