"""The memory steps of the chat pipeline before the request.

prepare_memory(): compaction when the history cannot fit (under the conversation's lock), the
memory bundle of the active summaries, and retrieval of the user's long-term memories. Its
``MemoryContext`` (memory_context.py) says where the history starts and how many tokens to
reserve, and ``apply`` puts the bundle and the memories into the assembled messages and reports
them. After the response: after_turn.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.compaction.bundle import SummaryView, render_bundle
from app.compaction.compactor import CompactionJob, CompactionReport, summary_views
from app.compaction.repository import summary_repository
from app.context.budget import TokenBudget
from app.conversations.messages import ConversationMessage
from app.conversations.service import ResolvedConversation
from app.core.settings import Settings
from app.llm.reach import HelperModels, helper_models
from app.memories.index_refresh import IndexServices
from app.memories.memory_block import (
    MemoryRequest,
    MemorySelection,
    date_prefix_wanted,
    select_memories,
)
from app.state import AppState
from app.tokens.counter import MESSAGE_OVERHEAD, REPLY_PRIMER, TokenCounter, text_of
from app.turns.after_turn import COMPACTION_DEFERRED
from app.turns.memory_context import MemoryContext, TurnAsked
from app.turns.memory_services import compactor, index_services

__all__ = ["MemoryContext", "MemoryTurn", "prepare_memory"]

logger = logging.getLogger(__name__)

# (boundary_tokens, summary_tokens) -> True when the request fits without more compaction
Fits = Callable[[int, int], bool]


@dataclass(frozen=True, slots=True)
class MemoryTurn:
    """The turn memory prepares: its context, its conversation, the new messages, and the
    budget with the system prompt and the current turn counted (measure_turn)."""

    context: TurnAsked
    resolved: ResolvedConversation
    new: list[ConversationMessage]
    budget: TokenBudget


def summarizer_model(helpers: HelperModels, context: TurnAsked) -> str:
    request = context.request
    return helpers.summarizer_for(request.context.summarizer_model, request.model)


async def prepare_memory(
    state: AppState, session: AsyncSession, turn: MemoryTurn, *, rewrite: bool = True
) -> MemoryContext:
    """What memory takes is reserved in ``turn.budget`` by the caller (``reserved_tokens``).
    ``rewrite``: the prompt is assembled anew (a rebase): compaction may run and the bundle is
    rebuilt. Without it the prompt owner keeps the previous prompt, bundle included, and only
    the new user message's per-turn block is made."""
    request = turn.context.request
    memory = MemoryContext(mode=request.context.memory_injection)
    conversation = turn.resolved.conversation
    if rewrite and conversation is not None and conversation.message_count:
        await _compaction_and_bundle(state, session, turn, memory)
    elif conversation is not None:
        # The kept prompt was built on the compaction boundary: the window is loaded from it,
        # not from the conversation's first message (history length stays free).
        memory.boundary_tokens = conversation.compacted_tokens
        memory.boundary_sequence = conversation.compacted_sequence
    asked = any(m.role == "user" for m in turn.new)
    wanted = request.context.memory and request.user
    if asked and (wanted or date_prefix_wanted(state.settings, request.context)):
        services = index_services(state)
        await _retrieval(services, state.settings, state.tokens, turn, session, memory)
    return memory


async def _compaction_and_bundle(
    state: AppState, session: AsyncSession, turn: MemoryTurn, memory: MemoryContext
) -> None:
    context, resolved, new, budget = turn.context, turn.resolved, turn.new, turn.budget
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
        summaries = await summary_repository.active_summaries(session, conversation.id)
    system, tools = budget.system, budget.tools
    new_tokens = sum(m.token_count for m in new)

    def fits(boundary_tokens: int, summary_tokens: int) -> bool:
        # Everything stored after the boundary plus the new messages: history and the current
        # turn, each counted once; the tools are sent beside them.
        raw = conversation.total_tokens - max(system, boundary_tokens)
        fixed = REPLY_PRIMER + system + tools
        return fixed + min(summary_tokens, cap) + raw + new_tokens <= total

    summary_tokens = sum(s.token_count for s in summaries)
    backlog = _compaction_backlog(settings, turn, memory.boundary_tokens, summary_tokens, cap)
    if backlog > 0:
        # More than one compaction run can summarize (a long history brought at once): the
        # request is not made to wait for it. The plain history fit now; the background
        # compacts after the answer (after_turn.py), and later requests use its summaries.
        memory.notes.append(
            f"{COMPACTION_DEFERRED} {backlog} tokens of history beyond what one compaction "
            "run summarizes; they are compacted in the background (plain history fit meanwhile)"
        )
    elif not fits(memory.boundary_tokens, summary_tokens):
        report = await _compact_now(state, turn, cap, fits)
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
                    summaries = await summary_repository.active_summaries(fresh, conversation.id)
        else:
            memory.notes.append("compaction skipped: another compaction held the lock")
    if summaries:
        _bundle(state.tokens, model, summary_views(summaries), cap, memory)


def _bundle(
    tokens: TokenCounter, model: str, summaries: list[SummaryView], cap: int, memory: MemoryContext
) -> None:
    """The active summaries as the memory bundle, within ``cap`` tokens."""
    bundle = render_bundle(
        summaries, cap_tokens=cap, count=lambda text: tokens.count_text(text, model)
    )
    if bundle.summaries_omitted:
        memory.notes.append(
            f"memory bundle: {bundle.summaries_omitted} older summaries did not fit its share"
        )
    if not bundle.empty:
        memory.bundle = bundle.text
        memory.bundle_tokens = MESSAGE_OVERHEAD + tokens.count_text(bundle.text, model)


def _compaction_backlog(
    settings: Settings, turn: MemoryTurn, boundary_tokens: int, summary_tokens: int, cap: int
) -> int:
    """Tokens by which the history overshoots the budget beyond what one compaction run (its
    ``compaction_max_calls`` summarizer windows) can take off; 0: compacting now can help."""
    conversation, budget, new = turn.resolved.conversation, turn.budget, turn.new
    assert conversation is not None
    raw = conversation.total_tokens - max(budget.system, boundary_tokens)
    fixed = REPLY_PRIMER + budget.system + budget.tools
    over = fixed + min(summary_tokens, cap) + raw + sum(m.token_count for m in new) - budget.total
    one_run = settings.compaction_max_calls * settings.summarizer_max_input_tokens
    return max(0, over - one_run)


async def _compact_now(
    state: AppState, turn: MemoryTurn, cap: int, fits: Fits
) -> CompactionReport | None:
    settings = state.settings
    context, resolved = turn.context, turn.resolved
    model = context.request.model
    job = CompactionJob(
        tenant_id=context.caller.tenant_id,
        conversation_id=resolved.conversation_id,
        summarizer_model=summarizer_model(helper_models(state), context),
        count=lambda text: state.tokens.count_text(text, model),
        bundle_cap=cap,
    )
    current_stored = not any(m.role == "user" for m in turn.new)
    locks = state.memory.locks
    async with locks.hold(
        resolved.conversation_id, timeout_s=settings.compaction_lock_timeout_s
    ) as held:
        if not held:
            return None
        report = CompactionReport(trigger="before_request")
        return await compactor(state, job).run(report, current_stored=current_stored, fits=fits)


async def _retrieval(
    index: IndexServices,
    settings: Settings,
    tokens: TokenCounter,
    turn: MemoryTurn,
    session: AsyncSession,
    memory: MemoryContext,
) -> None:
    """Facts, retrieved memories and the date (app/memories/memory_block.py) as one block,
    for the turn's newest user message, in what the bundle left of the budget."""
    context, budget = turn.context, turn.budget
    query = next(text_of(m.content) for m in reversed(turn.new) if m.role == "user")
    room = budget.total - budget.fixed - memory.bundle_tokens
    request = context.request
    model = request.model
    now = datetime.now(UTC)
    selection = MemorySelection()
    if request.context.memory and request.user:
        try:
            wanted = MemoryRequest(
                tenant_id=context.caller.tenant_id,
                user=request.user,
                query=query,
                options=request.context,
                count=lambda text: tokens.count_text(text, model),
                now=now,
            )
            selection = await select_memories(index, settings, session, wanted, memory.notes)
        except Exception as exc:  # memory must never fail the request
            logger.warning("memory retrieval failed", exc_info=True)
            memory.notes.append(f"memory retrieval failed ({type(exc).__name__}); none injected")
    if selection.empty and not date_prefix_wanted(settings, request.context):
        return
    block = selection.render(now, settings.memory_template)
    block_tokens = tokens.count_text(block, model) + 2
    if memory.mode != "user_prefix":
        block_tokens += MESSAGE_OVERHEAD
    if block_tokens > room:
        memory.notes.append("memories not injected: no room left in the input budget")
        return
    memory.context_block = block
    memory.context_tokens = block_tokens
    memory.injected = selection.memories
    memory.injected_report = selection.report()
