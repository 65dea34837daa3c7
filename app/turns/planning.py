"""The first two stages of a turn (app/turns/pipeline.py ``prepare``), each a frozen value.

1. ``measure_request`` — what the request alone says: its messages in chat form and their
   content hashes, its own system prompt, the budget in the provider's tokens (calibrated to
   contextgate's) with the tool definitions counted, and the cache policy.
2. ``read_turn`` — what the store adds, in one read transaction: the conversation the turn
   continues, its new messages (counted once), the budget's slices, the prompt owner's ledger
   and its decision (keep or rebase), and what the next stage builds from: the kept prompt's
   tool-loop step, or the assembly's inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from app.context.budget import BudgetPolicy, TokenBudget, count_tools, input_budget
from app.context.cache_policy import CachePolicy, cache_policy
from app.context.history import measure_turn
from app.conversations.fingerprint import content_hash
from app.conversations.messages import STORED_KEYS, ConversationMessage
from app.conversations.service import ResolvedConversation, conversation_service
from app.core.settings import Settings
from app.protocol.chat import ChatCompletionRequest
from app.state import AppState
from app.tokens.calibration import Calibration
from app.tokens.counter import TokenCounter
from app.turns.assembly import Loaded, load_assembly
from app.turns.context import TurnContext
from app.turns.ledger_repository import complete_ledger, load_ledger
from app.turns.loop_step import LoopStep, load_loop_step
from app.turns.owner import Decision, Ledger, Watermarks, decide
from app.turns.reading import TurnRead, attachments_key, continuation, own_system_prompt
from app.wire.chat import ChatMessage

__all__ = [
    "RequestFacts",
    "TurnPlan",
    "incoming_messages",
    "measure_request",
    "read_turn",
    "tool_definitions",
]


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """Stage 1: the request measured before anything is read from the store."""

    incoming: list[ChatMessage]  # the request's messages in chat form
    hashes: list[str]  # their content hashes (what matching and the seal compare)
    own_system: ConversationMessage | None  # the request's own system prompt, if it has one
    own_hash: str
    calibration: Calibration  # the model's provider tokens per contextgate token
    provider_budget: int  # the input budget in the provider's tokens
    budget: TokenBudget  # in contextgate's tokens, the tools counted, the rest unmeasured
    policy: CachePolicy


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """Stage 2: the turn read from the store and the owner's decision; exactly one of
    ``step`` (a tool-loop step appended to the kept prompt) and ``loaded`` (the inputs of an
    assembly: a rebase, or a new user turn) is set."""

    read: TurnRead
    marks: Watermarks
    decision: Decision
    step: LoopStep | None
    loaded: Loaded | None


def tool_definitions(request: ChatCompletionRequest) -> list[Mapping[str, object]]:
    """What the upstream gets as tool definitions: ``tools`` (every door's, normalised to the
    chat form) and the legacy ``functions``."""
    tools: list[Mapping[str, object]] = list(request.tools or [])
    functions = (request.model_extra or {}).get("functions")
    if isinstance(functions, list):
        tools += [f for f in functions if isinstance(f, dict)]
    return tools


_STORED = set(STORED_KEYS)


def incoming_messages(request: ChatCompletionRequest) -> list[ChatMessage]:
    """The request's messages in chat form, only what is stored of them (None left out): the
    door's own chat form when it wrote one, else the pydantic messages dumped."""
    form = request.chat_form
    if form is None:
        return cast(
            list[ChatMessage],
            [m.model_dump(include=_STORED, exclude_none=True) for m in request.messages],
        )
    return [
        m
        if m.keys() <= _STORED and None not in m.values()
        else cast(ChatMessage, {k: v for k in STORED_KEYS if (v := m.get(k)) is not None})
        for m in form
    ]


def _budget_policy(settings: Settings) -> BudgetPolicy:
    return BudgetPolicy(
        default_context_window=settings.default_context_window,
        output_reserve_tokens=settings.output_reserve_tokens,
        safety_margin_ratio=settings.safety_margin_ratio,
    )


async def measure_request(state: AppState, context: TurnContext) -> RequestFacts:
    request = context.request
    model = request.model
    incoming = incoming_messages(request)
    own_system = await own_system_prompt(state, context, incoming)
    calibration = await state.calibration.get(model)
    provider_budget = input_budget(
        explicit=request.context.max_input_tokens,
        context_window=state.llm.model_info(model).max_input_tokens,
        output_tokens_requested=request.output_tokens_requested,
        policy=_budget_policy(state.settings),
    )
    budget = TokenBudget(
        calibration.own_budget(provider_budget),
        # Sent with every call and never trimmed: counted once (cached by the tools' hash).
        tools=await count_tools(state.tokens, tool_definitions(request), model),
    )
    deployment = state.llm.router.find(model)
    return RequestFacts(
        incoming=incoming,
        hashes=[content_hash(m) for m in incoming],
        own_system=own_system,
        own_hash=content_hash(own_system.to_openai()) if own_system is not None else "",
        calibration=calibration,
        provider_budget=provider_budget,
        budget=budget,
        policy=cache_policy(
            state.settings, request.context.cache, deployment.cache if deployment else None
        ),
    )


async def read_turn(state: AppState, context: TurnContext, facts: RequestFacts) -> TurnPlan:
    request = context.request
    tenant_id = context.caller.tenant_id
    policy = facts.policy
    async with state.database.reading() as session:
        resolved = await conversation_service.resolve(
            session,
            tenant_id,
            facts.incoming,
            facts.hashes,
            request.conversation_id,
            at=context.continue_at,
        )
        new = await _new_messages(state.tokens, facts, resolved, request.model)
        shape = measure_turn(resolved, new)  # numbers the new messages
        read = TurnRead(resolved, new, shape, facts.own_system, facts.budget, policy).measured()
        budget = read.budget  # the measured one; the assembly returns its own (Loaded.budget)
        marks = Watermarks.of(budget.total, policy, fixed=budget.system + budget.tools)
        ledger: Ledger | None = None
        if resolved.ledger_read:  # read with the conversation, in the same statement
            if policy.enabled:
                ledger = await complete_ledger(session, resolved.ledger_row)
        elif policy.enabled and resolved.conversation is not None:
            ledger = await load_ledger(session, tenant_id, resolved.conversation_id)
        call = continuation(
            read,
            ledger,
            facts.own_hash,
            attachments_key(request),
            asked_to_rebase=request.context.rebase,
        )
        decision = decide(ledger, call, marks)
        if decision.ledger is not None and not any(m.role == "user" for m in new):
            step = await load_loop_step(session, resolved.conversation_id, decision.ledger, new)
            return TurnPlan(read, marks, decision, step, None)
        loaded = await load_assembly(
            state,
            context,
            session,
            read,
            rewrite=decision.rebase,
            marks=marks if decision.rebase and ledger is not None else None,
        )
        return TurnPlan(read, marks, decision, None, loaded)


async def _new_messages(
    tokens: TokenCounter, facts: RequestFacts, resolved: ResolvedConversation, model: str
) -> list[ConversationMessage]:
    """The messages the store does not hold yet, each counted once (large texts in the token
    pool: the loop serves other requests meanwhile)."""
    start = resolved.new_start
    await tokens.precount_messages(facts.incoming[start:], model)
    return [
        ConversationMessage(
            **message,
            token_count=tokens.count_message(message, model),
            content_hash=message_hash,
        )
        for message, message_hash in zip(facts.incoming[start:], facts.hashes[start:], strict=True)
    ]
