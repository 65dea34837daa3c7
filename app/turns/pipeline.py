"""Turn a chat request into the messages sent upstream, and record what came back.

prepare(): resolve the conversation, count the new messages once, load the history window,
assemble within the budget. record(): store the new messages and the answer, and the request
log, in one write transaction.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.attachments.service import attachment_service
from app.context.assembler import AssembledContext, AssemblyInput, CacheInput, assemble
from app.context.breakpoints import keep_client_breakpoints
from app.context.budget import BudgetPolicy, TokenBudget, count_tools, input_budget
from app.context.cache_fit import annotate as annotate_cache
from app.context.cache_hints import (
    add_cache_hints,
    client_marked_cache,
    is_anthropic_model,
    provider_cache_usage,
)
from app.context.cache_policy import CachePolicy, CacheState, cache_policy
from app.context.engine import apply_context_engine
from app.context.metadata import ContextUtilization, CostInfo
from app.context.seal import seal_assembled
from app.context.tokens import REPLY_PRIMER
from app.conversations.fingerprint import content_hash
from app.conversations.history import load_history_window, measure_turn
from app.conversations.messages import ConversationMessage
from app.conversations.service import ResolvedConversation, conversation_service
from app.core.state import AppState
from app.db.models import new_id
from app.keys.auth import Caller
from app.llm.responses import Usage
from app.llm.routing import is_anthropic
from app.memories.frozen import freeze_user_prefix, frozen_blocks, frozen_prefix_tokens
from app.memories.hooks import prepare_memory, schedule_memory_work
from app.protocol.chat import ChatCompletionRequest
from app.turns.context import RecordHook, TurnContext
from app.turns.observe import observe_chat
from app.turns.repository import request_log_repository

__all__ = ["Prepared", "prepare", "record"]

_STORED_KEYS = (
    "role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "thinking_blocks",
)  # fmt: skip


@dataclass(slots=True)
class Prepared:
    request: ChatCompletionRequest
    caller: Caller
    request_id: str
    started: float
    messages: list[dict[str, Any]]  # what goes upstream
    utilization: ContextUtilization
    resolved: ResolvedConversation | None = None  # None: context disabled, nothing stored
    new_messages: list[ConversationMessage] = field(default_factory=list)
    on_record: RecordHook | None = None  # the door's part of the turn's transaction
    cache_state: CacheState | None = None  # the cache-aware fit's state to store, if it moved
    prompt_hash: str | None = None  # of what goes upstream, stored with the answer (seal.py)
    # The door's provider headers (TurnContext.upstream_headers), for every upstream call.
    upstream_headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def conversation_id(self) -> str | None:
        return self.resolved.conversation_id if self.resolved else None


def _budget_policy(state: AppState) -> BudgetPolicy:
    settings = state.settings
    return BudgetPolicy(
        default_context_window=settings.default_context_window,
        output_reserve_tokens=settings.output_reserve_tokens,
        safety_margin_ratio=settings.safety_margin_ratio,
    )


def _tool_definitions(request: ChatCompletionRequest) -> list[dict[str, Any]]:
    """What the upstream gets as tool definitions: ``tools`` (every door's, normalised to the
    chat form) and the legacy ``functions``."""
    tools = list(request.tools or [])
    functions = (request.model_extra or {}).get("functions")
    if isinstance(functions, list):
        tools += [f for f in functions if isinstance(f, dict)]
    return tools


async def _passthrough(state: AppState, context: TurnContext) -> Prepared:
    request = context.request
    messages = [m.model_dump(exclude_none=True) for m in request.messages]
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
    request = context.request
    if not request.context.enabled:
        return await _passthrough(state, context)
    model = request.model
    incoming = [
        m.model_dump(include=set(_STORED_KEYS), exclude_none=True) for m in request.messages
    ]
    own_system = await _own_system_prompt(state, context, incoming)
    hashes = [content_hash(m) for m in incoming]
    budget = TokenBudget(
        input_budget(
            explicit=request.context.max_input_tokens,
            context_window=state.llm.model_info(model).max_input_tokens,
            output_tokens_requested=request.output_tokens_requested,
            policy=_budget_policy(state),
        ),
        # Sent with every call and never trimmed: counted once (cached by the tools' hash).
        tools=await count_tools(state.tokens, _tool_definitions(request), model),
    )
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
        # The system prompt and the current turn, counted once for every stage.
        deployment = state.llm.router.find(model)
        policy = cache_policy(
            state.settings, request.context.cache, deployment.cache if deployment else None
        )
        stored = _stored_cache_state(resolved) if policy.enabled else None
        shape = measure_turn(resolved, new)
        budget.system, budget.current = shape.system_tokens, shape.current_tokens
        if own_system is not None:
            budget.system += own_system.token_count
        # Compaction if due, memory bundle, long-term memories: what they take is reserved.
        memory = await prepare_memory(state, context, session, resolved, new, budget)
        budget.memory = memory.reserved_tokens
        window = await load_history_window(
            session,
            resolved,
            new,
            shape=shape,
            budget=budget,
            chunk_tokens=state.settings.history_trim_chunk_tokens,
            boundary_tokens=memory.boundary_tokens,
            boundary_sequence=memory.boundary_sequence,
            artifact_turns=0 if stored else state.settings.historical_turns,
            cache_state=stored,
        )
        if own_system is not None:
            window.system.insert(0, own_system)
        memory.frozen_tokens = frozen_prefix_tokens(state, window.current, model)
        budget.memory += memory.frozen_tokens
        attachments = await attachment_service.artifacts(
            session, context.caller.tenant_id, request.attachments
        )
    # Artifacts (tool results, attachments): plan, process, rewrite the window in place.
    engine = await apply_context_engine(
        state, request, context.caller.tenant_id, window, budget, attachments,
        historical_turns=0 if stored else None,
    )  # fmt: skip
    assembled: AssembledContext = assemble(
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
                blocks=frozen_blocks(state, window.history, window.current, model),
                compacted_sequence=memory.boundary_sequence,
            ),
        )
    )
    engine.annotate(assembled.utilization)
    if any(message.role == "user" for message in new):
        # Per-turn context is made for a new user message, then stays frozen with it (below):
        # a tool-loop call resends that message as it was sent, never with a new block.
        await memory.recall_messages(state, context, resolved, window, assembled, budget)
    memory.apply(assembled, budget)
    freeze_user_prefix(new, memory.user_prefix)
    # The seal (thinking resent only after an unchanged prefix, the prompt's hash) comes before
    # the client's and the provider's cache marks, which move every call.
    conversation = resolved.conversation
    newest = conversation.message_count - 1 if conversation is not None else -1
    seal = seal_assembled(assembled, newest_sequence=newest)
    if seal.reasoning_withheld:
        request = request.without_thinking(anthropic=_anthropic(state, model))
    keep_client_breakpoints(
        assembled.messages,
        dict(zip(hashes, incoming, strict=True)),
        set(hashes[resolved.new_start :]),
    )
    head = (len(window.system), 1 if memory.bundle else 0)
    moved = _cache_outcome(
        state, assembled, resolved, stored, policy, request, *head, seal.previous_kept
    )
    return Prepared(
        request=request,
        caller=context.caller,
        request_id=context.request_id,
        started=context.started,
        messages=assembled.messages,
        utilization=assembled.utilization,
        resolved=resolved,
        new_messages=new,
        on_record=context.on_record,
        cache_state=moved,
        prompt_hash=seal.prompt_hash,
        upstream_headers=context.upstream_headers,
    )


async def _own_system_prompt(
    state: AppState, context: TurnContext, incoming: list[dict[str, Any]]
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


def _stored_cache_state(resolved: ResolvedConversation) -> CacheState:
    conversation = resolved.conversation
    if conversation is None:
        return CacheState()
    return CacheState(
        conversation.cache_cut_sequence or 0,
        conversation.cache_cut_tokens or 0,
        conversation.cache_cleared_sequence or 0,
        conversation.cache_prefix_floor or 0,
    )


def _anthropic(state: AppState, model: str) -> bool:
    """Whether the model is reached as Anthropic's (by its name or its deployment's)."""
    deployment = state.llm.router.find(model)
    if deployment is None:
        return is_anthropic_model(model)
    return is_anthropic(deployment) or is_anthropic_model(deployment.litellm_model)


def _cache_outcome(
    state: AppState,
    assembled: AssembledContext,
    resolved: ResolvedConversation,
    stored: CacheState | None,
    policy: CachePolicy,
    request: ChatCompletionRequest,
    system_count: int,
    head_added: int,
    previous_kept: bool | None,
) -> CacheState | None:
    """Report the cache-aware fit, add provider hints; the state to store if it moved."""
    fit = assembled.cache
    if fit is None or stored is None:
        return None
    annotate_cache(
        fit,
        assembled.utilization,
        continuing=resolved.conversation is not None,
        previous_kept=previous_kept,
    )
    if policy.cache_hints and _anthropic(state, request.model):
        messages = assembled.messages
        if not client_marked_cache(messages, request.tools):
            add_cache_hints(messages, system_count, assembled.prefix_count + head_added)
    return fit.state if fit.state != stored else None


def answer_message(
    state: AppState, model: str, message: dict[str, Any], *, complete: bool = True
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


async def record(
    state: AppState,
    prepared: Prepared,
    *,
    answer: ConversationMessage | None,
    usage: Usage | None,
    cost: CostInfo,
    status: str = "ok",
    status_code: int = 200,
    error: str | None = None,
) -> None:
    """Store the turn and the request log in one transaction, before the client is answered."""
    request = prepared.request
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
                model=request.model,
                request_id=prepared.request_id,
                prompt_tokens=usage.prompt_tokens if usage else None,
                cache_state=prepared.cache_state,
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
                "status_code": status_code,
                "error": error,
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
    observe_chat(prepared, usage, cost, status)
    if answer is not None:  # background compaction / memory extraction, as they are due
        schedule_memory_work(state, prepared, usage)


def new_request_id() -> str:
    return new_id("req")
