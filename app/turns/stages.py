"""Stage 2 of a turn: the prompt, built by the prompt owner's decision (app/turns/owner.py).

- ``append_step``: a kept prompt's next tool-loop step (app/turns/loop_step.py);
- ``assemble_prompt``: a prompt assembled from storage (app/turns/assembly.py) — at a rebase,
  or for a new user turn on a kept prompt, of which only what follows the previous answer is
  appended (``append_turn``);
- ``rebase_after_all``: what was appended came out past the high-water mark.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.context.assembler import seal_assembled
from app.context.budget import TokenBudget
from app.context.cache_fit import annotate as annotate_cache
from app.context.metadata import ArtifactOutcome, ContextUtilization
from app.context.seal import chain_hash
from app.conversations.cache_state import CacheState
from app.conversations.messages import ConversationMessage
from app.state import AppState
from app.tokens.counter import REPLY_PRIMER
from app.turns.artifact_ledger import complete_artifacts
from app.turns.assembly import (
    Assembly,
    Loaded,
    answer_index,
    build_assembly,
    finish_memory,
    load_assembly,
    report_loop_clearing,
)
from app.turns.context import TurnContext
from app.turns.loop_step import LoopStep, append_loop_step
from app.turns.owner import KEPT, Decision, Ledger, Watermarks, appended
from app.turns.reading import TurnRead
from app.wire.chat import ChatMessage

__all__ = ["Built", "append_step", "assemble_prompt", "rebase_after_all"]


async def rebase_after_all(
    state: AppState, context: TurnContext, read: TurnRead, marks: Watermarks, kept: Built
) -> Built:
    """A new user turn that would pass the high-water mark once its context is added: the
    prompt is rebased after all (the turn's block is made again for the new prompt)."""
    assert kept.decision.ledger is not None
    tokens = kept.utilization.tokens_used
    reason = f"high-water mark: the prompt with the new turn would take {tokens} of {marks.budget}"
    decision = Decision(False, reason, None, kept.decision.ledger.epoch + 1)
    for message in read.new:
        message.context_prefix = None
    # ``read.budget`` is still the measured one: the first assembly returned its own budget.
    async with state.database.reading() as session:
        loaded = await load_assembly(state, context, session, read, rewrite=True, marks=marks)
    return await assemble_prompt(state, context, read, loaded, decision)


@dataclass(slots=True)
class Built:
    """The prompt a stage built, before cache marks."""

    messages: list[ChatMessage]
    utilization: ContextUtilization
    decision: Decision
    prompt_hash: str
    stable_end: int  # leading messages that are the previous prompt, kept
    cache_state: CacheState | None = None
    withhold_reasoning: bool = False


async def append_step(
    state: AppState,
    context: TurnContext,
    step: LoopStep,
    ledger: Ledger,
    budget: TokenBudget,
    marks: Watermarks,
) -> Built:
    """Stage 2a: a tool-loop step appended to the kept prompt."""
    messages, utilization = await append_loop_step(
        state,
        context,
        step,
        ledger,
        tools_tokens=budget.tools,
        marks=marks,
    )
    return _kept(messages, utilization, ledger, step.tail[0], budget)


async def assemble_prompt(
    state: AppState, context: TurnContext, read: TurnRead, loaded: Loaded, decision: Decision
) -> Built:
    """Stage 2b: the prompt assembled from storage; a kept prompt takes only its tail."""
    request = context.request
    resolved, new = read.resolved, read.new
    assembly = await build_assembly(
        state,
        context,
        loaded,
        policy=read.policy,
        force_rebase=decision.rebase and decision.epoch > 0,
    )
    await finish_memory(state, context, resolved, assembly, new)
    assembled = assembly.assembled
    utilization = assembled.utilization
    sources = [*assembly.window.history, *assembly.window.current]
    ledger = decision.ledger
    if ledger is not None:
        index = answer_index(assembled, ledger.answer_sequence)
        if index is not None:
            return append_turn(state, request.model, assembly, index, ledger)
        decision = Decision(
            False, "the previous answer is not in the prompt", None, ledger.epoch + 1
        )
    conversation = resolved.conversation
    newest = conversation.message_count - 1 if conversation is not None else -1
    seal = seal_assembled(assembled, newest_sequence=newest)
    utilization.artifacts_processed = complete_artifacts(
        assembled.messages, utilization.artifacts_processed, sources
    )
    moved = None
    if assembled.cache is not None and assembly.stored is not None:
        annotate_cache(
            assembled.cache,
            utilization,
            continuing=conversation is not None,
            previous_kept=seal.previous_kept,
        )
        if assembled.cache.state != assembly.stored:
            moved = assembled.cache.state
    report_loop_clearing(assembly, loaded.clearing)
    return Built(
        assembled.messages,
        utilization,
        decision,
        seal.prompt_hash,
        stable_end=assembled.prefix_count + (1 if assembly.memory.bundle else 0),
        cache_state=moved,
        withhold_reasoning=seal.reasoning_withheld,
    )


def append_turn(
    state: AppState,
    model: str,
    assembly: Assembly,
    index: int,
    ledger: Ledger,
) -> Built:
    """A new user turn on a kept prompt: the previous answer and what follows it (the new user
    message with its per-turn block: the memories and recalled messages) appended to the
    ledger."""
    assembled, budget = assembly.assembled, assembly.budget
    sources = [*assembly.window.history, *assembly.window.current]
    turn_memory = assembly.memory.context_tokens + assembly.memory.recall.tokens
    tail = assembled.messages[index:]
    messages = appended(ledger, tail)
    utilization = assembled.utilization
    tail_tokens = sum(state.tokens.count_message(message, model) for message in tail)
    breakdown = utilization.breakdown
    turn_memory = min(turn_memory, tail_tokens)
    breakdown.system, breakdown.memory = ledger.system_tokens, ledger.memory_tokens + turn_memory
    breakdown.history = ledger.tokens - ledger.system_tokens - ledger.memory_tokens
    breakdown.current, breakdown.artifacts = tail_tokens - turn_memory, 0
    utilization.tokens_used = REPLY_PRIMER + budget.tools + ledger.tokens + tail_tokens
    utilization.messages_included = len(messages)
    tail_calls = {m.get("tool_call_id") for m in tail if m.get("role") == "tool"}
    planned = [
        *(ArtifactOutcome.model_validate(a | {"carried": True}) for a in ledger.artifacts),
        *(a for a in utilization.artifacts_processed if a.artifact_id in tail_calls),
    ]
    utilization.artifacts_processed = complete_artifacts(messages, planned, sources)
    answer = next(a.message for a in assembled.anchors if a.rendered is tail[0])
    return _kept(messages, utilization, ledger, answer, budget)


def _kept(
    messages: list[ChatMessage],
    utilization: ContextUtilization,
    ledger: Ledger,
    answer: ConversationMessage,
    budget: TokenBudget,
) -> Built:
    """The prompt of a kept ledger and what was appended to it (``answer``: the previous one,
    whose stored hash says whether the ledger really is the prompt it answered)."""
    kept = len(ledger.messages)
    kept_prefix(utilization, ledger, previous_kept=answer.prompt_hash == ledger.chain_hash)
    utilization.cache_stats.prefix_tokens = REPLY_PRIMER + budget.tools + ledger.tokens
    return Built(
        messages,
        utilization,
        Decision(True, KEPT, ledger, ledger.epoch),
        chain_hash(ledger.chain_hash, messages[kept:]),
        stable_end=kept,
    )


def kept_prefix(utilization: ContextUtilization, ledger: Ledger, *, previous_kept: bool) -> None:
    """``cache_stats`` of a kept prompt: its placeholders are the ledger's; nothing cut now."""
    stats = utilization.cache_stats
    stats.prefix_kept = previous_kept
    stats.cut, stats.cut_at_sequence, stats.messages_dropped = False, None, 0
    stats.cleared_tool_results = ledger.cleared_tool_results
    stats.cleared_tokens = ledger.cleared_tokens
    stats.cleared_now = []
    utilization.messages_excluded = ledger.messages_excluded
