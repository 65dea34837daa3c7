"""Compacting a Responses history on the client's request (Codex's ``compaction_trigger``,
``POST /v1/responses/compact``), with contextgate's own compaction, for any model.

The history is stored as any turn's would be (the conversation found by id, by a compaction
item sent back, or by its leading messages); then, under the conversation's compaction lock,
the oldest whole turns beyond the raw tail are summarized (app/compaction/compactor.py). The
raw messages stay stored; the sealed compaction item names the conversation, and a later
request that sends it back continues it with the summaries, the raw tail and recall.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.compaction.compactor import CompactionJob, CompactionReport, Compactor
from app.compaction.llm_json import Summarizer
from app.compaction.repository import summary_repository
from app.context.budget import BudgetPolicy, input_budget
from app.conversations.fingerprint import content_hash
from app.conversations.messages import STORED_KEYS, ConversationMessage
from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.core.database import Database
from app.core.errors import BadRequest
from app.keys.caller import Caller
from app.llm.reach import helper_models
from app.protocol.chat import ChatCompletionRequest, ContextOptions
from app.responses.compaction_seal import SealedCompaction
from app.responses.schemas import ResponsesRequest
from app.state import AppState
from app.tokens.counter import TokenCounter
from app.turns.repository import request_log_repository
from app.wire.json import JSONObject
from app.wire.responses import ResponsesUsage

__all__ = ["Compacted", "compact_conversation", "compact_turn", "log_compaction"]


@dataclass(slots=True)
class Compacted:
    conversation_id: str
    sealed: SealedCompaction
    report: CompactionReport
    notes: list[str] = field(default_factory=list)

    def utilization(self, model: str) -> JSONObject:
        """What ``context_utilization`` says of a compaction pass (no upstream call)."""
        report = self.report
        return {
            "model_name": model,
            "strategy": "compaction",
            "compaction": report.as_dict() if report.summarizer_calls or report.error else None,
            "planning_cost": {
                "planner_cost": 0.0,
                "summarizer_cost": round(report.cost, 8),
                "total_cost": round(report.cost, 8),
            },
            "notes": self.notes,
        }

    def usage(self) -> ResponsesUsage:
        """Responses' usage of the compaction pass: the summarizer's tokens."""
        prompt, completion = self.report.prompt_tokens, self.report.completion_tokens
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }


def _refuse_unmanaged(turn: ChatCompletionRequest) -> None:
    if not turn.context.enabled:
        raise BadRequest(
            "Compaction needs the conversation stored, and this request's context is not "
            "managed (context.enabled=false, or store=false with "
            "CONTEXTGATE_RESPONSES_STORE_FALSE=passthrough).",
            param="input",
            code="compaction_unavailable",
        )


async def _store_history(
    database: Database,
    tokens: TokenCounter,
    caller: Caller,
    turn: ChatCompletionRequest,
    at: int | None,
    own_system: bool,
) -> str:
    """Store what of the history is not stored yet; the conversation's id."""
    incoming = [m.model_dump(include=set(STORED_KEYS), exclude_none=True) for m in turn.messages]
    if own_system and incoming and incoming[0]["role"] == "system":
        incoming.pop(0)  # instructions: this request's only, never stored
    if not incoming:
        raise BadRequest("There is no history to compact.", param="input", code="empty_input")
    hashes = [content_hash(m) for m in incoming]
    tenant_id, model = caller.tenant_id, turn.model
    async with database.reading() as session:
        resolved = await conversation_service.resolve(
            session, tenant_id, incoming, hashes, turn.conversation_id, at=at
        )
        await tokens.precount_messages(incoming[resolved.new_start :], model)
    new = [
        ConversationMessage(
            **message, token_count=tokens.count_message(message, model), content_hash=hashed
        )
        for message, hashed in zip(
            incoming[resolved.new_start :], hashes[resolved.new_start :], strict=True
        )
    ]
    if not new:
        return resolved.conversation_id
    async with database.writing() as session:
        return await conversation_service.append_turn(
            session, tenant_id, resolved, new, Stamp(model)
        )


async def compact_turn(
    state: AppState,
    caller: Caller,
    turn: ChatCompletionRequest,
    *,
    at: int | None = None,
    own_system: bool = False,
) -> Compacted:
    """Store the history ``turn`` holds, compact its conversation; what to seal and report."""
    _refuse_unmanaged(turn)
    conversation_id = await _store_history(
        state.database, state.tokens, caller, turn, at, own_system
    )
    return await compact_conversation(state, caller, conversation_id, turn.model, turn.context)


async def compact_conversation(
    state: AppState, caller: Caller, conversation_id: str, model: str, context: ContextOptions
) -> Compacted:
    """Summarize the stored conversation's turns beyond the raw tail, under its lock."""
    if not context.enabled:
        raise BadRequest(
            "Compaction needs the conversation's context managed (context.enabled=false).",
            param="context.enabled",
            code="compaction_unavailable",
        )
    settings = state.settings
    total = input_budget(
        explicit=context.max_input_tokens,
        context_window=state.llm.model_info(model).max_input_tokens,
        output_tokens_requested=None,
        policy=BudgetPolicy(
            default_context_window=settings.default_context_window,
            output_reserve_tokens=settings.output_reserve_tokens,
            safety_margin_ratio=settings.safety_margin_ratio,
        ),
    )
    job = CompactionJob(
        tenant_id=caller.tenant_id,
        conversation_id=conversation_id,
        summarizer_model=helper_models(state).summarizer_for(context.summarizer_model, model),
        count=lambda text: state.tokens.count_text(text, model),
        bundle_cap=int(total * settings.summary_budget_share),
    )
    compactor = Compactor(state.database, settings, Summarizer(state.llm, settings), job)
    report = CompactionReport(trigger="client_request")
    notes: list[str] = []
    async with state.memory.locks.hold(
        conversation_id, timeout_s=settings.compaction_lock_timeout_s
    ) as held:
        if held:
            await compactor.run(report, current_stored=True, fits=None)
        else:
            notes.append("compaction skipped: another compaction held the lock")
    if report.error:
        notes.append(f"compaction failed ({report.error}); the raw history is sent as it fits")
    elif not report.summarizer_calls and held:
        notes.append(
            f"nothing to compact beyond the raw tail ({settings.raw_tail_turns} turns): "
            "the history is kept and fitted as it is"
        )
    async with state.database.reading() as session:
        conversation = await summary_repository.conversation(
            session, caller.tenant_id, conversation_id
        )
    upto = conversation.message_count if conversation is not None else 0
    return Compacted(conversation_id, SealedCompaction(conversation_id, upto), report, notes)


async def log_compaction(
    database: Database,
    caller: Caller,
    compacted: Compacted,
    body: ResponsesRequest,
    *,
    request_id: str,
    started: float,
) -> None:
    """The pass in the request log: its summarizer cost counts in the key's spend."""
    model, stream = body.model, body.stream
    cost = round(compacted.report.cost, 8)
    async with database.writing() as session:
        await request_log_repository.insert(
            session,
            {
                "id": request_id,
                "tenant_id": caller.tenant_id,
                "key_id": caller.key_id,
                "conversation_id": compacted.conversation_id,
                "model": model,
                "stream": stream,
                "status": "ok",
                "status_code": 200,
                "error": None,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "prompt_cost": 0.0,
                "completion_cost": 0.0,
                "planning_cost": cost,
                "total_cost": cost,
                "latency_ms": round((time.perf_counter() - started) * 1000, 2),
                "context_utilization": compacted.utilization(model),
            },
        )
