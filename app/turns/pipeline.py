"""Turn a chat request into the messages sent upstream, and record what came back.

``prepare()`` runs the turn's four stages, each handing the next a frozen value:

1. ``measure_request`` → ``RequestFacts``: the request's messages, hashes, own system prompt,
   budget (calibrated, tools counted) and cache policy (app/turns/planning.py);
2. ``read_turn`` → ``TurnPlan``: the conversation, the new messages counted once, the
   budget's slices, the prompt owner's ledger and decision, and a loop step or the assembly's
   inputs, in one read transaction (app/turns/planning.py);
3. ``build_prompt`` → ``Built``: the loop step appended to the kept prompt, or the prompt
   assembled (app/turns/stages.py);
4. ``seal_prompt`` → ``Prepared``: the owner's record of the prompt, thinking withheld if it
   had to be, the cache marks.

``record()`` stores the new messages, the answer, the prompt's ledger and the request log in
one write transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from app.context.budget import count_tools
from app.context.cache_hints import is_anthropic_model, provider_cache_usage
from app.context.metadata import (
    ArtifactOutcomeRecord,
    ContextUtilization,
    CostInfo,
    TokenCalibrationStats,
)
from app.context.seal import LOOP_CUT_NOTE
from app.conversations.messages import STORED_KEYS, ConversationMessage
from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.core.tasks import after_answer
from app.db.models import new_id
from app.llm.responses import Usage
from app.llm.routing import is_anthropic
from app.state import AppState
from app.tokens.calibration import sample_ratio
from app.tokens.counter import REPLY_PRIMER
from app.turns.after_turn import schedule_memory_work
from app.turns.context import TurnContext
from app.turns.ledger_repository import remember_ledger, save_ledger
from app.turns.marks import ClientMarks, place_marks
from app.turns.observe import chat_observation
from app.turns.owner import PromptRecord, next_part
from app.turns.planning import (
    RequestFacts,
    TurnPlan,
    measure_request,
    read_turn,
    tool_definitions,
)
from app.turns.prepared import Prepared
from app.turns.reading import attachments_key, leading_system
from app.turns.repository import request_log_repository
from app.turns.stages import Built, append_step, assemble_prompt, rebase_after_all
from app.wire.chat import ChatMessage

__all__ = ["Outcome", "build_prompt", "prepare", "record", "seal_prompt"]


async def _passthrough(state: AppState, context: TurnContext) -> Prepared:
    request = context.request
    messages = request.chat_messages()
    tokens = await state.tokens.count_messages_async(messages, request.model)  # off the loop
    tools = await count_tools(state.tokens, tool_definitions(request), request.model)
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
    """The turn's stages, each handing the next a frozen value: measure the request, read the
    stored turn and the prompt owner's decision (app/turns/planning.py), build the prompt
    (append a tool-loop step to the kept prompt, or assemble: a rebase, or a new user turn
    appended after the kept prompt), then seal and mark it."""
    if not context.request.context.enabled:
        return await _passthrough(state, context)
    facts = await measure_request(state, context)
    plan = await read_turn(state, context, facts)
    built = await build_prompt(state, context, plan)
    return seal_prompt(state, context, facts, plan, built)


async def build_prompt(state: AppState, context: TurnContext, plan: TurnPlan) -> Built:
    """Stage 3: the prompt. A kept prompt that came out above the high-water mark (a new
    turn's per-turn context larger than estimated) is rebased after all."""
    read, marks, decision = plan.read, plan.marks, plan.decision
    if plan.step is not None and decision.ledger is not None:
        built = await append_step(state, context, plan.step, decision.ledger, read.budget, marks)
    else:
        assert plan.loaded is not None
        built = await assemble_prompt(state, context, read, plan.loaded, decision)
    if built.decision.keep and built.utilization.tokens_used > marks.high:
        built = await rebase_after_all(state, context, read, marks, built)
    return built


def seal_prompt(
    state: AppState, context: TurnContext, facts: RequestFacts, plan: TurnPlan, built: Built
) -> Prepared:
    """Stage 4: what the prompt owner records of the prompt (before cache marks: they move),
    the request without thinking if the loop's reasoning had to go, the cache marks, and the
    utilization's last figures."""
    request, model = context.request, context.request.model
    utilization = built.utilization
    utilization.calibration = TokenCalibrationStats(
        ratio=round(facts.calibration.ratio, 4),
        samples=facts.calibration.samples,
        provider_max_input_tokens=facts.provider_budget,
    )
    stats = utilization.cache_stats
    stats.rebased, stats.prompt_epoch = built.decision.rebase, built.decision.epoch
    stats.rebase_reason = None if built.decision.keep else built.decision.reason
    if built.withhold_reasoning:
        request = request.without_thinking(anthropic=_anthropic(state, model))
        utilization.thinking_disabled = LOOP_CUT_NOTE
    stored = next_part(built.decision.ledger, built.messages)  # before cache marks: they move
    record = PromptRecord(
        epoch=built.decision.epoch,
        own_system_hash=facts.own_hash,
        attachments_key=attachments_key(request),
        encoded_messages=stored.encoded_messages,
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
        part=stored.part,
        base_part=stored.base_part,
        previous_chain=stored.previous_chain,
        prefix_parts=stored.prefix_parts,
    )
    resolved = plan.read.resolved
    place_marks(
        built.messages,
        ClientMarks(facts.incoming, facts.hashes, resolved.new_start, request.tools),
        system_count=leading_system(built.messages),
        stable_end=built.stable_end,
        provider_hints=facts.policy.enabled
        and facts.policy.cache_hints
        and _anthropic(state, model),
    )
    return Prepared(
        request=request,
        caller=context.caller,
        request_id=context.request_id,
        started=context.started,
        messages=built.messages,
        utilization=utilization,
        resolved=resolved,
        new_messages=plan.read.new,
        on_record=context.on_record,
        cache_state=built.cache_state,
        prompt_hash=built.prompt_hash,
        upstream_headers=context.upstream_headers,
        prompt=record if facts.policy.enabled else None,
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
    stored = {key: message.get(key) for key in STORED_KEYS if message.get(key) is not None}
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
    kept: tuple[str, PromptRecord] | None = None  # the ledger part written, and where
    async with state.database.writing() as session:
        resolved = prepared.resolved
        if resolved is not None and answer is not None:
            read_from = None if resolved.is_new else resolved.conversation_id
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
                prompt = prepared.prompt
                if resolved.conversation_id != read_from:  # a new conversation, or a branch
                    prompt = prompt.as_base()
                await save_ledger(
                    session,
                    prepared.caller.tenant_id,
                    resolved.conversation_id,
                    prompt.row(answer.sequence_number, answer.token_count, prepared.prompt_hash),
                    replaces=prompt.is_base and resolved.conversation_id == read_from,
                )
                kept = (resolved.conversation_id, prompt)
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
    if kept is not None and prepared.prompt_hash is not None:  # before the next call can come
        remember_ledger(prepared.caller.tenant_id, *kept, prepared.prompt_hash)
    observation = chat_observation(prepared, usage, cost, status)
    after_answer(
        state.background, lambda: _bookkeeping(state, prepared, usage, answer, observation)
    )


def _bookkeeping(
    state: AppState,
    prepared: Prepared,
    usage: Usage | None,
    answer: ConversationMessage | None,
    observation: Callable[[], None],
) -> None:
    """What the stored turn tells this process, once its answer is on its way: the token
    calibration, the metrics, the background work due."""
    sample = sample_ratio(prepared.utilization.tokens_used, usage.prompt_tokens if usage else None)
    if sample is not None and answer is not None:
        state.calibration.observe(prepared.request.model, sample)
    observation()
    if answer is not None:  # background compaction / memory extraction, as they are due
        schedule_memory_work(state, prepared, usage, answer)


def new_request_id() -> str:
    return new_id("req")
