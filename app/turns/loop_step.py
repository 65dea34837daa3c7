"""A kept prompt's next tool-loop step: the previous prompt as it was, then what is new.

The prompt owner decided to keep (app/turns/owner.py) and the request brings no new user
message: the previous answer and this call's tool results are appended to the ledger. Only they
are loaded, counted, planned (a new tool result gets its decision as it enters: with room under
the high-water mark it is sent in full) and rendered; nothing of the kept prompt is re-read,
re-encoded or re-planned, so a 150k-token agent prompt costs what its newest step costs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.context.budget import TokenBudget
from app.context.engine import apply_context_engine
from app.context.history import HistoryWindow
from app.context.inputs import EngineWindow
from app.context.metadata import ArtifactOutcome, ContextBreakdown, ContextUtilization
from app.conversations.messages import ConversationMessage, attach_reasoning_steps, from_history_row
from app.conversations.repository import conversation_repository
from app.state import AppState
from app.tokens.counter import REPLY_PRIMER
from app.turns.context import TurnContext
from app.turns.owner import Ledger, Watermarks, appended
from app.wire.chat import ChatMessage

__all__ = ["LoopStep", "append_loop_step", "load_loop_step"]


@dataclass(slots=True)
class LoopStep:
    """The messages appended to the ledger, as stored messages (the answer) and new ones."""

    tail: list[ConversationMessage]


async def load_loop_step(
    session: AsyncSession, conversation_id: str, ledger: Ledger, new: list[ConversationMessage]
) -> LoopStep:
    rows = await conversation_repository.messages_from(
        session, conversation_id, ledger.answer_sequence
    )
    stored = [from_history_row(row) for row in rows]
    return LoopStep(attach_reasoning_steps([*stored, *new]))


def _render(message: ConversationMessage) -> ChatMessage:
    """A loop message as sent: the loop's answers carry their reasoning back (the loop started
    before the kept prompt's end, and no user message follows them)."""
    carries = message.role == "assistant" and bool(
        message.thinking_blocks or message.reasoning_content
    )
    return message.to_openai(with_reasoning=carries, with_prefix=False)


async def append_loop_step(
    state: AppState,
    context: TurnContext,
    step: LoopStep,
    ledger: Ledger,
    *,
    tools_tokens: int,
    marks: Watermarks,
) -> tuple[list[ChatMessage], ContextUtilization]:
    """The prompt (ledger + rendered step) and its utilization, with this step's artifacts
    planned within what the high-water mark leaves."""
    request, tenant_id = context.request, context.caller.tenant_id
    model = request.model
    window = HistoryWindow(current=list(step.tail))
    budget = TokenBudget(
        marks.high,
        system=ledger.tokens,  # the kept prompt: fixed, like a system prompt
        tools=tools_tokens,
        current=window.current_tokens,
    )
    engine = await apply_context_engine(
        state, request, tenant_id, EngineWindow(window, budget, historical_turns=0)
    )
    tail = [_render(message) for message in window.current]
    await state.tokens.precount_messages(tail, model)
    tail_tokens = sum(state.tokens.count_message(message, model) for message in tail)
    history = ledger.tokens - ledger.system_tokens - ledger.memory_tokens
    utilization = ContextUtilization(
        model_name=model,
        strategy="appended",
        max_input_tokens=marks.budget,
        tokens_used=REPLY_PRIMER + tools_tokens + ledger.tokens + tail_tokens,
        breakdown=ContextBreakdown(
            system=ledger.system_tokens,
            tools=tools_tokens,
            history=history,
            memory=ledger.memory_tokens,
            current=tail_tokens,
            overhead=REPLY_PRIMER,
        ),
    )
    engine.annotate(utilization)
    utilization.artifacts_processed = [
        *(ArtifactOutcome.model_validate(a | {"carried": True}) for a in ledger.artifacts),
        *utilization.artifacts_processed,
    ]
    messages = appended(ledger, tail)
    utilization.messages_included = len(messages)
    return messages, utilization
