"""Assemble what is sent upstream: system prompt, fitted history, current turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.context.fit import fit_history
from app.context.metadata import ContextBreakdown, ContextUtilization
from app.context.reasoning import render_messages
from app.context.tokens import REPLY_PRIMER
from app.conversations.messages import ConversationMessage
from app.core.errors import ContextLengthExceeded

__all__ = ["AssembledContext", "AssemblyInput", "assemble"]


@dataclass(slots=True)
class AssemblyInput:
    model: str
    budget: int
    system: list[ConversationMessage]
    history: list[ConversationMessage]
    current: list[ConversationMessage]
    region_start: int
    region_end: int
    region_count: int
    chunk_tokens: int


@dataclass(slots=True)
class AssembledContext:
    messages: list[dict[str, Any]]
    utilization: ContextUtilization


def assemble(spec: AssemblyInput) -> AssembledContext:
    system_tokens = sum(m.token_count for m in spec.system)
    current_tokens = sum(m.token_count for m in spec.current)
    fixed = REPLY_PRIMER + system_tokens + current_tokens
    if fixed > spec.budget:
        raise ContextLengthExceeded(
            f"The system prompt and the newest message need {fixed} tokens, more than the "
            f"input budget of {spec.budget} tokens for model '{spec.model}'. Shorten the "
            "message or raise context.max_input_tokens.",
            param="messages",
        )
    fit = fit_history(
        spec.history,
        region_start=spec.region_start,
        region_end=spec.region_end,
        region_count=spec.region_count,
        available=spec.budget - fixed,
        chunk_tokens=spec.chunk_tokens,
    )
    sent = spec.system + fit.kept + spec.current
    utilization = ContextUtilization(
        model_name=spec.model,
        strategy="simple",
        max_input_tokens=spec.budget,
        tokens_used=fixed + fit.tokens,
        messages_included=len(sent),
        messages_excluded=fit.excluded_count,
        breakdown=ContextBreakdown(
            system=system_tokens,
            history=fit.tokens,
            current=current_tokens,
            overhead=REPLY_PRIMER,
        ),
    )
    return AssembledContext(render_messages(sent, utilization), utilization)
