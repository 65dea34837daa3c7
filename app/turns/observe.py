"""Feed one recorded chat request to the Prometheus metrics (a single call from record()).

The figures are taken when the request is recorded and fed to the metrics after its answer
(``after_answer``): a door's own notes added after record() do not count as fallbacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from app.context.metadata import CostInfo
from app.core import metrics
from app.llm.responses import Usage

if TYPE_CHECKING:
    from app.turns.prepared import Prepared

__all__ = ["chat_observation"]


def full_context_tokens(prepared: Prepared) -> int:
    """Tokens of the whole stored conversation plus the new messages: what a naive proxy sends."""
    resolved = prepared.resolved
    stored = resolved.conversation.total_tokens if resolved and resolved.conversation else 0
    return stored + sum(message.token_count for message in prepared.new_messages)


def chat_observation(
    prepared: Prepared, usage: Usage | None, cost: CostInfo, status: str
) -> Callable[[], None]:
    """The request's figures as they are now, and a call that feeds them to the metrics."""
    if prepared.resolved is None:  # pass-through: nothing was managed
        full = prepared.utilization.tokens_used
    else:
        full = full_context_tokens(prepared)
    figures = metrics.ChatFigures(
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        prompt_cost=cost.prompt_cost,
        completion_cost=cost.completion_cost,
        planning_cost=cost.planning_cost,
        full_context_tokens=full,
        notes=tuple(prepared.utilization.notes),
    )
    utilization = prepared.utilization
    return lambda: metrics.record_chat(utilization, status, figures)
