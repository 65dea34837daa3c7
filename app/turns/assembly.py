"""A prompt assembled from the stored conversation: at a rebase, or for a new user turn.

The first stage (``load_assembly``, in the request's read transaction) loads what can be sent:
compaction and the memory bundle when the prompt is rewritten, the user's memories, the
history window, attachments. The second (``build_assembly``) plans the artifacts, fits the
history and renders. At a rebase the prompt owner's deep cut applies: the loop's oldest tool
results are cleared and the history is cut down to the low-water mark (app/turns/owner.py);
for a new user turn on a kept prompt, the caller keeps only what follows the previous answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.attachments.service import attachment_service
from app.context.artifacts import Artifact
from app.context.assembler import AssembledContext, AssemblyInput, assemble
from app.context.budget import TokenBudget
from app.context.cache_fit import CacheInput
from app.context.cache_policy import CachePolicy
from app.context.engine import apply_context_engine
from app.context.engine_result import EngineResult
from app.context.history import HistoryWindow, WindowSpec, load_history_window
from app.context.inputs import EngineWindow
from app.conversations.cache_state import CacheState
from app.conversations.messages import ConversationMessage
from app.conversations.service import ResolvedConversation
from app.state import AppState
from app.tokens.counter import REPLY_PRIMER
from app.turns.context import TurnContext
from app.turns.frozen import freeze_user_prefix, frozen_blocks, frozen_prefix_tokens
from app.turns.loop_clearing import LoopClearing, clear_loop_results
from app.turns.memory_context import MemoryContext
from app.turns.memory_steps import MemoryTurn, prepare_memory
from app.turns.owner import Watermarks
from app.turns.reading import TurnRead

__all__ = [
    "Assembly",
    "Loaded",
    "answer_index",
    "build_assembly",
    "finish_memory",
    "load_assembly",
    "report_loop_clearing",
    "stored_cache_state",
]


@dataclass(frozen=True, slots=True)
class Loaded:
    """What the read transaction loaded for the assembly: the window, memory, attachments, and
    the budget with memory's part reserved (and the current turn as a rebase cleared it)."""

    budget: TokenBudget
    window: HistoryWindow
    memory: MemoryContext
    attachments: list[Artifact]
    stored: CacheState | None  # the cache-aware fit's stored state (None: fit off)
    clearing: LoopClearing | None  # a rebase's cleared loop results


@dataclass(frozen=True, slots=True)
class Assembly:
    """The assembled prompt and what made it; ``budget``: the one it was assembled within
    (``current`` as the context engine rewrote the turn)."""

    budget: TokenBudget
    assembled: AssembledContext
    engine: EngineResult
    memory: MemoryContext
    window: HistoryWindow
    stored: CacheState | None


def stored_cache_state(resolved: ResolvedConversation) -> CacheState:
    conversation = resolved.conversation
    if conversation is None:
        return CacheState()
    return CacheState(
        conversation.cache_cut_sequence or 0,
        conversation.cache_cut_tokens or 0,
        conversation.cache_cleared_sequence or 0,
        conversation.cache_prefix_floor or 0,
    )


async def load_assembly(
    state: AppState,
    context: TurnContext,
    session: AsyncSession,
    read: TurnRead,
    *,
    rewrite: bool,
    marks: Watermarks | None,
) -> Loaded:
    """``rewrite``: compaction may run and the bundle is rebuilt; ``marks``: a rebase of the
    prompt owner (the loop's old tool results are cleared down to the low-water mark). The
    result's budget is ``read.budget`` with memory's part and the current turn as loaded."""
    resolved, new, policy = read.resolved, read.new, read.policy
    request = context.request
    model = request.model
    stored = stored_cache_state(resolved) if policy.enabled else None
    turn = MemoryTurn(context, resolved, new, read.budget)
    memory = await prepare_memory(state, session, turn, rewrite=rewrite)
    # The window is loaded with the bundle and the memories reserved; the frozen block after.
    budget = read.budget.with_memory(memory.reserved_tokens)
    spec = WindowSpec(
        shape=read.shape,
        budget=budget,
        chunk_tokens=state.settings.history_trim_chunk_tokens,
        boundary_tokens=memory.boundary_tokens,
        boundary_sequence=memory.boundary_sequence,
        artifact_turns=0 if stored else state.settings.historical_turns,
        cache_state=stored,
    )
    window = await load_history_window(session, resolved, new, spec)
    if read.own_system is not None:
        window.system.insert(0, read.own_system)
    memory.frozen_tokens = frozen_prefix_tokens(state.tokens, window.current, model)
    budget = budget.with_memory(budget.memory + memory.frozen_tokens)
    clearing = None
    if marks is not None:
        others = REPLY_PRIMER + budget.system + budget.tools + budget.memory
        clearing = clear_loop_results(
            window.current,
            target=max(0, marks.low - others),
            policy=policy,
            count=lambda message: state.tokens.count_message(message, model),
        )
        window.current = clearing.messages
        budget = budget.with_current(window.current_tokens)
    attachments = await attachment_service.artifacts(
        session, context.caller.tenant_id, request.attachments
    )
    return Loaded(budget, window, memory, attachments, stored, clearing)


async def build_assembly(
    state: AppState,
    context: TurnContext,
    loaded: Loaded,
    *,
    policy: CachePolicy,
    force_rebase: bool,
) -> Assembly:
    """Plan the artifacts, fit the history, render (outside the read transaction), within
    ``loaded.budget``; the history is fitted to the budget after the engine's rewrite."""
    request = context.request
    model = request.model
    window, memory, stored = loaded.window, loaded.memory, loaded.stored
    turn = EngineWindow(
        window, loaded.budget, loaded.attachments, historical_turns=0 if stored else None
    )
    engine = await apply_context_engine(state, request, context.caller.tenant_id, turn)
    budget = engine.budget  # ``current``: the rewritten turn, which is what will be sent
    assembled = assemble(
        AssemblyInput(
            model=model,
            budget=budget,
            system=window.system,
            history=window.history,
            current=window.current,
            region_start=window.region_start,
            region_end=window.region_end,
            region_count=window.region_count,
            chunk_tokens=state.settings.history_trim_chunk_tokens,
            cache=None
            if stored is None
            else CacheInput(
                policy=policy,
                state=stored,
                region_first=window.region_first,
                current_first=window.current_first,
                count=lambda message: state.tokens.count_message(message, model),
                blocks=frozen_blocks(
                    state.settings, state.tokens, window.history, window.current, model
                ),
                compacted_sequence=memory.boundary_sequence,
                force=force_rebase,
            ),
        )
    )
    engine.annotate(assembled.utilization)
    return Assembly(budget, assembled, engine, memory, window, stored)


async def finish_memory(
    state: AppState,
    context: TurnContext,
    resolved: ResolvedConversation,
    assembly: Assembly,
    new: list[ConversationMessage],
) -> None:
    """Recall for a new user message, then the bundle and the per-turn block, frozen with it."""
    memory, assembled, budget = assembly.memory, assembly.assembled, assembly.budget
    if any(message.role == "user" for message in new):
        # Per-turn context is made for a new user message, then stays frozen with it: a
        # tool-loop call resends that message as it was sent, never with a new block.
        await memory.recall_messages(state, context, resolved, assembly.window, assembled, budget)
    memory.apply(assembled, budget)
    freeze_user_prefix(new, memory.user_prefix)


def report_loop_clearing(assembly: Assembly, clearing: LoopClearing | None) -> None:
    """Add a rebase's cleared loop results to ``cache_stats`` (beside the fit's)."""
    if clearing is None or not clearing.cleared:
        return
    stats = assembly.assembled.utilization.cache_stats
    stats.cleared_tool_results += len(clearing.cleared)
    stats.cleared_tokens += clearing.saved_tokens
    stats.cleared_now.extend(c.report() for c in clearing.cleared)


def answer_index(assembled: AssembledContext, answer_sequence: int) -> int | None:
    """Where the previous answer stands in the assembled prompt (found by identity: the
    rendered message the assembler recorded for the seal)."""
    anchor = next(
        (a for a in assembled.anchors if a.message.sequence_number == answer_sequence), None
    )
    if anchor is None:
        return None
    return next((i for i, m in enumerate(assembled.messages) if m is anchor.rendered), None)
