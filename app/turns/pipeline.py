"""Turn a chat request into the messages sent upstream, and record what came back.

prepare(): resolve the conversation, count the new messages once, load the history window,
assemble within the budget. record(): store the new messages and the answer, and the request
log, in one write transaction.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import orjson

from app.context.budget import BudgetPolicy, TokenBudget, count_tools, input_budget
from app.context.cache_hints import is_anthropic_model, provider_cache_usage
from app.context.cache_policy import cache_policy
from app.context.history import measure_turn
from app.context.metadata import (
    ArtifactOutcomeRecord,
    ContextUtilization,
    CostInfo,
    TokenCalibrationStats,
)
from app.context.seal import LOOP_CUT_NOTE
from app.conversations.fingerprint import content_hash
from app.conversations.messages import ConversationMessage
from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.db.models import new_id
from app.llm.responses import Usage
from app.llm.routing import is_anthropic
from app.protocol.chat import ChatCompletionRequest
from app.state import AppState
from app.tokens.calibration import sample_ratio
from app.tokens.counter import REPLY_PRIMER
from app.turns.after_turn import schedule_memory_work
from app.turns.assembly import (
    Loaded,
    load_assembly,
)
from app.turns.context import TurnContext
from app.turns.ledger_repository import ledger_of, load_ledger, save_ledger
from app.turns.loop_step import LoopStep, load_loop_step
from app.turns.marks import ClientMarks, place_marks
from app.turns.observe import observe_chat
from app.turns.owner import (
    PromptRecord,
    Watermarks,
    decide,
)
from app.turns.prepared import Prepared
from app.turns.reading import (
    TurnRead,
    attachments_key,
    continuation,
    leading_system,
    own_system_prompt,
)
from app.turns.repository import request_log_repository
from app.turns.stages import append_step, assemble_prompt, rebase_after_all
from app.wire.chat import ChatMessage

__all__ = ["Outcome", "prepare", "record"]

_STORED_KEYS = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "reasoning_content",
    "thinking_blocks",
)


def _budget_policy(state: AppState) -> BudgetPolicy:
    settings = state.settings
    return BudgetPolicy(
        default_context_window=settings.default_context_window,
        output_reserve_tokens=settings.output_reserve_tokens,
        safety_margin_ratio=settings.safety_margin_ratio,
    )


def _tool_definitions(request: ChatCompletionRequest) -> list[Mapping[str, object]]:
    """What the upstream gets as tool definitions: ``tools`` (every door's, normalised to the
    chat form) and the legacy ``functions``."""
    tools: list[Mapping[str, object]] = list(request.tools or [])
    functions = (request.model_extra or {}).get("functions")
    if isinstance(functions, list):
        tools += [f for f in functions if isinstance(f, dict)]
    return tools


async def _passthrough(state: AppState, context: TurnContext) -> Prepared:
    request = context.request
    messages = request.chat_messages()
    tokens = await state.tokens.count_messages_async(messages, request.model)  # off the loop
    tools = await count_tools(state.tokens, _tool_definitions(request), request.model)
    utilization = ContextUtilization(
        model_name=request.model,
        strategy="passthrough",
        tokens_used=tokens + tools,
        messages_included=len(messages),
    )
    utilization.breakdown.tools = tools
    utilization.breakdown.current = tokens - REPLY_PRIMER
    utilization.breakdown.overhead = REPLY_PRIMER
    return Prepared(
        request,
        context.caller,
        context.request_id,
        context.started,
        messages,
        utilization,
        upstream_headers=context.upstream_headers,
    )  # nothing is stored: no on_record


async def prepare(state: AppState, context: TurnContext) -> Prepared:
    """The turn's stages: read (conversation, new messages, budget, the owner's decision), then
    either append a tool-loop step to the kept prompt or assemble (a rebase, or a new user turn
    appended after the kept prompt), then seal and mark the prompt."""
    request = context.request
    if not request.context.enabled:
        return await _passthrough(state, context)
    model = request.model
    incoming = cast(  # the door's pydantic messages, dumped: the chat form
        list[ChatMessage],
        [m.model_dump(include=set(_STORED_KEYS), exclude_none=True) for m in request.messages],
    )
    own_system = await own_system_prompt(state, context, incoming)
    hashes = [content_hash(m) for m in incoming]
    calibration = await state.calibration.get(model)
    provider_budget = input_budget(
        explicit=request.context.max_input_tokens,
        context_window=state.llm.model_info(model).max_input_tokens,
        output_tokens_requested=request.output_tokens_requested,
        policy=_budget_policy(state),
    )
    unmeasured = TokenBudget(
        calibration.own_budget(provider_budget),
        # Sent with every call and never trimmed: counted once (cached by the tools' hash).
        tools=await count_tools(state.tokens, _tool_definitions(request), model),
    )
    deployment = state.llm.router.find(model)
    policy = cache_policy(
        state.settings, request.context.cache, deployment.cache if deployment else None
    )
    own_hash = content_hash(own_system.to_openai()) if own_system is not None else ""
    loaded: Loaded | None = None
    step: LoopStep | None = None
    async with state.database.reading() as session:
        resolved = await conversation_service.resolve(
            session,
            context.caller.tenant_id,
            incoming,
            hashes,
            request.conversation_id,
            at=context.continue_at,
        )
        # Large texts are counted in the token pool: the loop serves other requests meanwhile.
        await state.tokens.precount_messages(incoming[resolved.new_start :], model)
        new = [
            ConversationMessage(
                **message,
                token_count=state.tokens.count_message(message, model),
                content_hash=message_hash,
            )
            for message, message_hash in zip(
                incoming[resolved.new_start :], hashes[resolved.new_start :], strict=True
            )
        ]
        shape = measure_turn(resolved, new)  # numbers the new messages
        read = TurnRead(resolved, new, shape, own_system, unmeasured, policy).measured()
        budget = read.budget  # the measured one; the assembly returns its own (Loaded.budget)
        marks = Watermarks.of(budget.total, policy, fixed=budget.system + budget.tools)
        ledger = None
        if resolved.ledger_read:  # read with the conversation, in the same statement
            ledger = ledger_of(resolved.ledger_row) if policy.enabled else None
        elif policy.enabled and resolved.conversation is not None:
            ledger = await load_ledger(session, context.caller.tenant_id, resolved.conversation_id)
        call = continuation(
            read, ledger, own_hash, attachments_key(request), asked_to_rebase=request.context.rebase
        )
        decision = decide(ledger, call, marks)
        if decision.ledger is not None and not any(m.role == "user" for m in new):
            step = await load_loop_step(session, resolved.conversation_id, decision.ledger, new)
        else:
            loaded = await load_assembly(
                state,
                context,
                session,
                read,
                rewrite=decision.rebase,
                marks=marks if decision.rebase and ledger is not None else None,
            )
    if step is not None and decision.ledger is not None:
        built = await append_step(state, context, step, decision.ledger, budget, marks)
    else:
        assert loaded is not None
        built = await assemble_prompt(state, context, read, loaded, decision)
    if built.decision.keep and built.utilization.tokens_used > marks.high:
        # What was appended came out larger than estimated (a new turn's per-turn context).
        built = await rebase_after_all(state, context, read, marks, built)
    utilization = built.utilization
    utilization.calibration = TokenCalibrationStats(
        ratio=round(calibration.ratio, 4),
        samples=calibration.samples,
        provider_max_input_tokens=provider_budget,
    )
    stats = utilization.cache_stats
    stats.rebased, stats.prompt_epoch = built.decision.rebase, built.decision.epoch
    stats.rebase_reason = None if built.decision.keep else built.decision.reason
    if built.withhold_reasoning:
        request = request.without_thinking(anthropic=_anthropic(state, model))
        utilization.thinking_disabled = LOOP_CUT_NOTE
    record = PromptRecord(
        epoch=built.decision.epoch,
        own_system_hash=own_hash,
        attachments_key=attachments_key(request),
        encoded_messages=orjson.dumps(built.messages),  # before cache marks: they move
        tokens=max(0, utilization.tokens_used - utilization.breakdown.tools - REPLY_PRIMER),
        system_tokens=utilization.breakdown.system,
        memory_tokens=utilization.breakdown.memory,
        artifacts=[
            cast(ArtifactOutcomeRecord, a.model_dump(mode="json"))
            for a in utilization.artifacts_processed
        ],
        cleared_tool_results=stats.cleared_tool_results,
        cleared_tokens=stats.cleared_tokens,
        messages_excluded=utilization.messages_excluded,
    )
    place_marks(
        built.messages,
        ClientMarks(incoming, hashes, resolved.new_start, request.tools),
        system_count=leading_system(built.messages),
        stable_end=built.stable_end,
        provider_hints=policy.enabled and policy.cache_hints and _anthropic(state, model),
    )
    return Prepared(
        request=request,
        caller=context.caller,
        request_id=context.request_id,
        started=context.started,
        messages=built.messages,
        utilization=utilization,
        resolved=resolved,
        new_messages=new,
        on_record=context.on_record,
        cache_state=built.cache_state,
        prompt_hash=built.prompt_hash,
        upstream_headers=context.upstream_headers,
        prompt=record if policy.enabled else None,
    )


def _anthropic(state: AppState, model: str) -> bool:
    """Whether the model is reached as Anthropic's (by its name or its deployment's)."""
    deployment = state.llm.router.find(model)
    if deployment is None:
        return is_anthropic_model(model)
    return is_anthropic(deployment) or is_anthropic_model(deployment.litellm_model)


def answer_message(
    state: AppState, model: str, message: ChatMessage, *, complete: bool = True
) -> ConversationMessage:
    stored = {key: message.get(key) for key in _STORED_KEYS if message.get(key) is not None}
    stored["role"] = "assistant"
    return ConversationMessage(
        **stored,
        token_count=state.tokens.count_message(stored, model),
        status="complete" if complete else "incomplete",
    )


def costs(prepared: Prepared, prompt: float, completion: float) -> CostInfo:
    return CostInfo.of(prompt, completion, prepared.utilization.planning_cost.total_cost)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the request ended, as its log row says (``error``: already redacted, cut)."""

    status: str = "ok"
    status_code: int = 200
    error: str | None = None


async def record(
    state: AppState,
    prepared: Prepared,
    *,
    answer: ConversationMessage | None,
    usage: Usage | None,
    cost: CostInfo,
    outcome: Outcome = Outcome(),
) -> None:
    """Store the turn and the request log in one transaction, before the client is answered."""
    request = prepared.request
    status = outcome.status
    provider_cache_usage(prepared.utilization, usage.raw if usage else None)
    async with state.database.writing() as session:
        resolved = prepared.resolved
        if resolved is not None and answer is not None:
            answer.prompt_hash = prepared.prompt_hash
            # A turn that had to continue a given position may land on a branch (``at``).
            resolved.conversation_id = await conversation_service.append_turn(
                session,
                prepared.caller.tenant_id,
                resolved,
                [*prepared.new_messages, answer],
                Stamp(
                    request.model,
                    request_id=prepared.request_id,
                    prompt_tokens=usage.prompt_tokens if usage else None,
                    cache_state=prepared.cache_state,
                ),
            )
            if prepared.prompt is not None and prepared.prompt_hash is not None:
                await save_ledger(
                    session,
                    prepared.caller.tenant_id,
                    resolved.conversation_id,
                    prepared.prompt.row(
                        answer.sequence_number, answer.token_count, prepared.prompt_hash
                    ),
                )
            if prepared.on_record is not None:
                await prepared.on_record(session, prepared, answer, usage)
        await request_log_repository.insert(
            session,
            {
                "id": prepared.request_id,
                "tenant_id": prepared.caller.tenant_id,
                "key_id": prepared.caller.key_id,
                "conversation_id": resolved.conversation_id if resolved and answer else None,
                "model": request.model,
                "stream": request.stream,
                "status": status,
                "status_code": outcome.status_code,
                "error": outcome.error,
                "prompt_tokens": usage.prompt_tokens if usage else 0,
                "completion_tokens": usage.completion_tokens if usage else 0,
                "prompt_cost": cost.prompt_cost,
                "completion_cost": cost.completion_cost,
                "planning_cost": cost.planning_cost,
                "total_cost": cost.total_cost,
                "latency_ms": round((time.perf_counter() - prepared.started) * 1000, 2),
                "context_utilization": prepared.utilization.model_dump(mode="json"),
            },
        )
    sample = sample_ratio(prepared.utilization.tokens_used, usage.prompt_tokens if usage else None)
    if sample is not None and answer is not None:
        state.calibration.observe(request.model, sample)
    observe_chat(prepared, usage, cost, status)
    if answer is not None:  # background compaction / memory extraction, as they are due
        schedule_memory_work(state, prepared, usage, answer)


def new_request_id() -> str:
    return new_id("req")
