"""The memory steps of the chat pipeline: before the request (and, re-exported from
app.memories.background, after the response).

prepare_memory(): compaction when the history cannot fit (under the conversation's lock), the
memory bundle of the active summaries, and retrieval of the user's long-term memories. Its
``MemoryContext`` says where the history starts and how many tokens to reserve, and ``apply``
puts the bundle and the memories into the assembled messages and reports them.

schedule_memory_work(): after the turn is stored, in the background: compaction when the
upstream reported prompt tokens above compaction_ratio x input budget, and memory extraction
per mode. A failure of either never touches the answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.context.assembler import AssembledContext
from app.context.budget import TokenBudget
from app.context.tokens import MESSAGE_OVERHEAD, REPLY_PRIMER, text_of
from app.conversations.messages import ConversationMessage
from app.conversations.service import ResolvedConversation
from app.core.state import AppState
from app.db.models import Conversation
from app.llm.reach import helper_models
from app.memories.background import COMPACTION_DEFERRED, schedule_memory_work
from app.memories.bundle import render_bundle
from app.memories.compaction import CompactionReport, Compactor, summary_views
from app.memories.injection import inject, insert_bundle
from app.memories.memory_block import MemorySelection, date_prefix_wanted, select_memories
from app.memories.recall_turn import RecallResult, recall_for_turn
from app.memories.repository import memory_repository
from app.memories.retrieval import Retrieved
from app.turns.context import TurnContext

__all__ = ["MemoryContext", "prepare_memory", "schedule_memory_work"]

logger = logging.getLogger(__name__)
_SYSTEM_ROLES = ("system", "developer")


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
    injected_report: list[dict[str, Any]] = field(default_factory=list)
    compaction: dict[str, Any] | None = None
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
        context: TurnContext,
        resolved: ResolvedConversation,
        window: Any,
        assembled: AssembledContext,
        budget: TokenBudget,
    ) -> None:
        """Message recall (recall_turn.py), within what the assembly left of the budget."""
        own = self.bundle_tokens + self.context_tokens
        room = min(
            state.settings.recall_token_cap, budget.total - own - assembled.utilization.tokens_used
        )
        await recall_for_turn(
            state,
            context.request,
            context.caller.tenant_id,
            resolved.conversation,
            resolved.conversation_id,
            window,
            assembled,
            room=room,
            boundary_sequence=self.boundary_sequence,
            message_overhead=self.mode == "context_message",
            result=self.recall,
        )

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


def summarizer_model(state: AppState, context: TurnContext) -> str:
    request = context.request
    return helper_models(state).summarizer_for(request.context.summarizer_model, request.model)


async def prepare_memory(
    state: AppState,
    context: TurnContext,
    session: AsyncSession,
    resolved: ResolvedConversation,
    new: list[ConversationMessage],
    budget: TokenBudget,
    *,
    rewrite: bool = True,
) -> MemoryContext:
    """``budget`` has the system prompt and current turn counted (measure_turn); what memory
    takes is reserved in it by the caller (``reserved_tokens``). ``rewrite``: the prompt is
    assembled anew (a rebase): compaction may run and the bundle is rebuilt. Without it the
    prompt owner keeps the previous prompt, bundle included, and only the new user message's
    per-turn block is made."""
    request = context.request
    memory = MemoryContext(mode=request.context.memory_injection)
    conversation = resolved.conversation
    if rewrite and conversation is not None and conversation.message_count:
        await _compaction_and_bundle(state, context, session, resolved, new, budget, memory)
    elif conversation is not None:
        # The kept prompt was built on the compaction boundary: the window is loaded from it,
        # not from the conversation's first message (history length stays free).
        memory.boundary_tokens = conversation.compacted_tokens
        memory.boundary_sequence = conversation.compacted_sequence
    user_texts = [text_of(m.content) for m in new if m.role == "user"]
    wanted = request.context.memory and request.user
    if user_texts and (wanted or date_prefix_wanted(state, request.context)):
        room = budget.total - budget.fixed - memory.bundle_tokens
        await _retrieval(state, context, session, user_texts[-1], room, memory)
    return memory


async def _compaction_and_bundle(
    state: AppState,
    context: TurnContext,
    session: AsyncSession,
    resolved: ResolvedConversation,
    new: list[ConversationMessage],
    budget: TokenBudget,
    memory: MemoryContext,
) -> None:
    conversation = resolved.conversation
    assert conversation is not None
    settings = state.settings
    model = context.request.model
    total = budget.total
    cap = max(0, min(int(total * settings.summary_budget_share), total - budget.fixed))
    memory.boundary_tokens = conversation.compacted_tokens
    memory.boundary_sequence = conversation.compacted_sequence
    summaries = resolved.summaries  # read with the conversation when it was named
    if summaries is None:
        summaries = await memory_repository.active_summaries(session, conversation.id)
    system, tools = budget.system, budget.tools
    new_tokens = sum(m.token_count for m in new)

    def fits(boundary_tokens: int, summary_tokens: int) -> bool:
        # Everything stored after the boundary plus the new messages: history and the current
        # turn, each counted once; the tools are sent beside them.
        raw = conversation.total_tokens - max(system, boundary_tokens)
        fixed = REPLY_PRIMER + system + tools
        return fixed + min(summary_tokens, cap) + raw + new_tokens <= total

    summary_tokens = sum(s.token_count for s in summaries)
    backlog = _compaction_backlog(state, conversation, memory, summary_tokens, cap, budget, new)
    if backlog > 0:
        # More than one compaction run can summarize (a long history brought at once): the
        # request is not made to wait for it. The plain history fit now; the background
        # compacts after the answer (background.py), and later requests use its summaries.
        memory.notes.append(
            f"{COMPACTION_DEFERRED} {backlog} tokens of history beyond what one compaction "
            "run summarizes; they are compacted in the background (plain history fit meanwhile)"
        )
    elif not fits(memory.boundary_tokens, summary_tokens):
        report = await _compact_now(state, context, resolved, new, cap, fits)
        if report is not None:
            if report.summarizer_calls or report.error:
                memory.compaction = report.as_dict()
                memory.summarizer_cost += report.cost
                memory.summarizer_calls += report.summarizer_calls
                memory.summarizer_tokens = (report.prompt_tokens, report.completion_tokens)
            if report.error:
                memory.notes.append(
                    f"compaction failed ({report.error}); used the plain history fit"
                )
            if report.boundary_tokens != memory.boundary_tokens:
                memory.boundary_tokens = report.boundary_tokens
                memory.boundary_sequence = report.boundary_sequence
                async with state.database.reading() as fresh:
                    summaries = await memory_repository.active_summaries(fresh, conversation.id)
        else:
            memory.notes.append("compaction skipped: another compaction held the lock")
    if not summaries:
        return
    bundle = render_bundle(
        summary_views(summaries),
        cap_tokens=cap,
        count=lambda text: state.tokens.count_text(text, model),
    )
    if bundle.summaries_omitted:
        memory.notes.append(
            f"memory bundle: {bundle.summaries_omitted} older summaries did not fit its share"
        )
    if not bundle.empty:
        memory.bundle = bundle.text
        memory.bundle_tokens = MESSAGE_OVERHEAD + state.tokens.count_text(bundle.text, model)


def _compaction_backlog(
    state: AppState,
    conversation: Conversation,
    memory: MemoryContext,
    summary_tokens: int,
    cap: int,
    budget: TokenBudget,
    new: list[ConversationMessage],
) -> int:
    """Tokens by which the history overshoots the budget beyond what one compaction run (its
    ``compaction_max_calls`` summarizer windows) can take off; 0: compacting now can help."""
    settings = state.settings
    raw = conversation.total_tokens - max(budget.system, memory.boundary_tokens)
    fixed = REPLY_PRIMER + budget.system + budget.tools
    over = fixed + min(summary_tokens, cap) + raw + sum(m.token_count for m in new) - budget.total
    one_run = settings.compaction_max_calls * settings.summarizer_max_input_tokens
    return max(0, over - one_run)


async def _compact_now(
    state: AppState,
    context: TurnContext,
    resolved: ResolvedConversation,
    new: list[ConversationMessage],
    cap: int,
    fits: Any,
) -> CompactionReport | None:
    settings = state.settings
    model = context.request.model
    compactor = Compactor(
        state,
        tenant_id=context.caller.tenant_id,
        conversation_id=resolved.conversation_id,
        summarizer_model=summarizer_model(state, context),
        count=lambda text: state.tokens.count_text(text, model),
        bundle_cap=cap,
    )
    current_stored = not any(m.role == "user" for m in new)
    locks = state.memory.locks
    async with locks.hold(
        resolved.conversation_id, timeout_s=settings.compaction_lock_timeout_s
    ) as held:
        if not held:
            return None
        report = CompactionReport(trigger="before_request")
        return await compactor.run(report, current_stored=current_stored, fits=fits)


async def _retrieval(
    state: AppState,
    context: TurnContext,
    session: AsyncSession,
    query: str,
    room: int,
    memory: MemoryContext,
) -> None:
    """Facts, retrieved memories and the date (app/memories/memory_block.py) as one block."""
    request = context.request
    model = request.model
    now = datetime.now(UTC)
    selection = MemorySelection()
    if request.context.memory and request.user:
        try:
            selection = await select_memories(
                state, session, context.caller.tenant_id, request.user, query, request.context,
                count=lambda text: state.tokens.count_text(text, model),
                notes=memory.notes, now=now,
            )  # fmt: skip
        except Exception as exc:  # memory must never fail the request
            logger.warning("memory retrieval failed", exc_info=True)
            memory.notes.append(f"memory retrieval failed ({type(exc).__name__}); none injected")
    if selection.empty and not date_prefix_wanted(state, request.context):
        return
    block = selection.render(now, state.settings.memory_template)
    tokens = state.tokens.count_text(block, model) + 2
    if memory.mode != "user_prefix":
        tokens += MESSAGE_OVERHEAD
    if tokens > room:
        memory.notes.append("memories not injected: no room left in the input budget")
        return
    memory.context_block = block
    memory.context_tokens = tokens
    memory.injected = selection.memories
    memory.injected_report = selection.report()
