"""After the turn is stored: background compaction and memory extraction, as they are due.

Compaction prepares its summaries when a rebase of the prompt is near: the upstream reported
prompt tokens above compaction_ratio (per request, per model, or the default: 0.8) of the
high-water mark (``cache_high_water_ratio`` of the budget, in the provider's tokens). The
summaries wait until the prompt owner's next rebase puts them in the prompt (app/turns/
owner.py): a kept prompt is never rewritten by compaction. Compaction only tries the
conversation's lock and skips when another compaction holds it. Extraction runs per mode
(every_turn, periodic, off) for requests with a ``user``. Neither delays the answer, and a
failure of either is logged, never raised.
"""

from __future__ import annotations

import logging

from app.compaction.compactor import CompactionJob, CompactionReport, Compactor
from app.compaction.locks import ConversationLocks
from app.compaction.periodic import PeriodicJob, periodic_due, run_periodic_summary
from app.conversations.messages import ConversationMessage
from app.conversations.service import ResolvedConversation
from app.core.settings import Settings
from app.core.tasks import spawn
from app.llm.reach import helper_models
from app.llm.responses import Usage
from app.memories.extraction import ExtractionJob, extraction_due, run_extraction
from app.recall.backlog import schedule_message_vectors
from app.recall.message_vectors import worth_embedding
from app.state import AppState
from app.turns.memory_services import compactor, index_services, recall_services, summarizer
from app.turns.prepared import Prepared

__all__ = ["COMPACTION_DEFERRED", "compaction_ratio", "schedule_memory_work"]

logger = logging.getLogger(__name__)


# Share of the token budget a conversation's prompt reaches before its messages are embedded.
RECALL_VECTORS_FROM = 0.5
# How a request's notes say that it left a compaction backlog to the background
# (memory_steps.py).
COMPACTION_DEFERRED = "compaction deferred:"


def compaction_ratio(settings: Settings, context_ratio: float | None, model: str) -> float:
    if context_ratio is not None:
        return context_ratio
    return settings.compaction_ratio_by_model.get(model, settings.compaction_ratio)


def schedule_memory_work(
    state: AppState, prepared: Prepared, usage: Usage | None, answer: ConversationMessage
) -> None:
    """After the turn is stored (``answer`` with it): background compaction, extraction and
    message vectors, as they are due."""
    request = prepared.request
    resolved: ResolvedConversation | None = prepared.resolved
    if resolved is None or not request.context.enabled:
        return
    settings = state.settings
    tenant_id = prepared.caller.tenant_id
    budget = prepared.utilization.max_input_tokens
    model = helper_models(state).summarizer_for(request.context.summarizer_model, request.model)
    ratio = compaction_ratio(settings, request.context.compaction_ratio, request.model)
    if prepared.prompt is not None:  # the prompt owner keeps this conversation's prompt
        # A share of the mark that starts a rebase; 1.0: never ahead of it, only at rebases.
        ratio = ratio * settings.cache_high_water_ratio if ratio < 1 else float("inf")
    provider_budget = prepared.utilization.calibration.provider_max_input_tokens or budget
    deferred = any(n.startswith(COMPACTION_DEFERRED) for n in prepared.utilization.notes)
    if (
        usage is not None
        and budget
        and (deferred or usage.prompt_tokens > ratio * provider_budget)
        and _may_compact(settings, prepared, resolved)
    ):
        compaction = CompactionJob(
            tenant_id=tenant_id,
            conversation_id=resolved.conversation_id,
            summarizer_model=model,
            count=lambda text: state.tokens.count_text(text, request.model),
            bundle_cap=int(budget * settings.summary_budget_share),
        )
        work = _compact_in_background(state.memory.locks, compactor(state, compaction))
        spawn(state.background, work)
    periodic = _periodic_job(settings, prepared, resolved, model)
    if periodic is not None:
        work = run_periodic_summary(state.database, summarizer(state), state.tokens, periodic)
        spawn(state.background, work)
    if request.context.memory and _recall_may_search(prepared, usage, budget):
        key = (tenant_id, resolved.conversation_id)
        textless_at = _textless_at(prepared, resolved, answer)
        schedule_message_vectors(
            recall_services(state), settings, key, request.user, textless_at=textless_at
        )
    mode = request.context.memory_extraction or settings.memory_extraction_mode
    if request.user and request.context.memory and mode != "off":
        before = resolved.conversation.turn_count if resolved.conversation else 0
        turn_count = before + sum(1 for m in prepared.new_messages if m.role == "user")
        turns = extraction_due(mode, settings.memory_extraction_every, turn_count)
        if turns:
            job = ExtractionJob(
                tenant_id=tenant_id,
                user=request.user,
                conversation_id=resolved.conversation_id,
                turns=turns,
                model=model,
                count_model=request.model,
            )
            work = run_extraction(index_services(state), summarizer(state), state.tokens, job)
            spawn(state.background, work)


def _textless_at(
    prepared: Prepared, resolved: ResolvedConversation, answer: ConversationMessage
) -> int | None:
    """None when the turn stored text to embed; else the sequence below which the
    conversation's tool results are cleared now (what its vector job would read)."""
    if any(worth_embedding(m.role, m.content) for m in (*prepared.new_messages, answer)):
        return None
    if prepared.cache_state is not None:
        return prepared.cache_state.cleared_sequence
    conversation = resolved.conversation
    return (conversation.cache_cleared_sequence or 0) if conversation is not None else 0


def _may_compact(settings: Settings, prepared: Prepared, resolved: ResolvedConversation) -> bool:
    """Whether compaction could find a window: the raw region (the turns after the compacted
    ones) holds more turns than the raw tail it always keeps. An agent's long tool loop is one
    turn: compacting it would read the whole history back on every call to find nothing."""
    conversation = resolved.conversation
    turns = conversation.turn_count if conversation is not None else 0
    turns += sum(1 for m in prepared.new_messages if m.role == "user")
    compacted = (conversation.compacted_turn or 0) if conversation is not None else 0
    # +1: messages before the first user message (turn 0) may be raw too.
    return turns - compacted + 1 > settings.raw_tail_turns


def _recall_may_search(prepared: Prepared, usage: Usage | None, budget: int | None) -> bool:
    """Whether message recall may ever search this conversation's messages, so they are worth
    embedding now (each costs a transformer pass): its user's other conversations search it
    (a ``user``), or its history is cut or nearing the cut (from ``RECALL_VECTORS_FROM`` of the
    budget, the whole backlog is embedded then, ahead of the first cut). A short anonymous
    conversation is never embedded; one cut before its backlog was, has the newest cut
    messages embedded by the recall itself (``recall.search``), the rest here."""
    if prepared.request.user:
        return True
    utilization = prepared.utilization
    if utilization.messages_excluded or utilization.compaction:
        return True
    if utilization.cache_stats.cleared_tool_results:  # recall brings cleared results back
        return True
    tokens = max(utilization.tokens_used, usage.prompt_tokens if usage is not None else 0)
    return budget is not None and budget > 0 and tokens >= RECALL_VECTORS_FROM * budget


def _periodic_job(
    settings: Settings, prepared: Prepared, resolved: ResolvedConversation, model: str
) -> PeriodicJob | None:
    """The periodic summary due after this turn: every N message pairs
    (context.summary_every_pairs, else the setting); None when none is."""
    request = prepared.request
    every = request.context.summary_every_pairs
    if every is None:
        every = settings.summary_every_pairs
    new_turns = sum(1 for m in prepared.new_messages if m.role == "user")
    before = resolved.conversation.turn_count if resolved.conversation else 0
    if not periodic_due(every, before + new_turns, new_turns > 0):
        return None
    return PeriodicJob(
        tenant_id=prepared.caller.tenant_id,
        conversation_id=resolved.conversation_id,
        pairs=every,
        model=model,
        count_model=request.model,
    )


async def _compact_in_background(locks: ConversationLocks, compactor: Compactor) -> None:
    conversation_id = compactor.conversation_id
    try:
        async with locks.hold(conversation_id, timeout_s=None) as held:
            if not held:
                return  # another request is compacting this conversation right now
            report = CompactionReport(trigger="after_response")
            await compactor.run(report, current_stored=False, fits=None)
        logger.info("compaction", extra={"conversation_id": conversation_id, **report.as_dict()})
    except Exception:
        logger.exception(
            "background compaction crashed", extra={"conversation_id": conversation_id}
        )
