"""One turn, not streamed: prepare, call upstream, record, hand the result to the door."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TypedDict

from app.context.cache_hints import provider_cache_cost
from app.context.metadata import CostInfo
from app.core.errors import ContextGateError
from app.llm.responses import Usage
from app.state import AppState
from app.turns.context import TurnContext
from app.turns.memory_services import upstream_services
from app.turns.native import call_upstream
from app.turns.pipeline import Outcome, answer_message, costs, prepare, record
from app.turns.prepared import Prepared
from app.wire.chat import ChatCompletion, ChatMessage
from app.wire.json import JSONObject

__all__ = ["Extensions", "TurnResult", "record_failure", "run_turn", "turn_cost"]

logger = logging.getLogger(__name__)


class Extensions(TypedDict):
    """contextgate's fields beside a door's own answer (every door sends them)."""

    conversation_id: str | None
    cost: JSONObject
    context_utilization: JSONObject


@dataclass(slots=True)
class TurnResult:
    """What a door renders: the stored answer in chat form, its usage and cost."""

    prepared: Prepared
    message: ChatMessage  # role, content, tool_calls, reasoning_content, thinking_blocks
    finish_reason: str | None
    usage: Usage | None
    cost: CostInfo
    completion: ChatCompletion | None = None  # the normalized chat.completion (not streamed)

    @property
    def conversation_id(self) -> str | None:
        return self.prepared.conversation_id

    def extensions(self) -> Extensions:
        """contextgate's fields beside the door's own answer."""
        return {
            "conversation_id": self.prepared.conversation_id,
            "cost": self.cost.model_dump(),
            "context_utilization": self.prepared.utilization.model_dump(mode="json"),
        }


def turn_cost(
    prepared: Prepared,
    prompt: float,
    completion: float,
    *,
    cache_read: float = 0.0,
    cache_write: float = 0.0,
) -> CostInfo:
    """The turn's cost: the answer's (its prompt cache priced in ``prompt``, its reads and
    writes apart) plus planning; the cache's part is also reported in ``cache_stats``."""
    planning = prepared.utilization.planning_cost.total_cost
    cost = CostInfo.of(prompt, completion, planning, cache_read=cache_read, cache_write=cache_write)
    provider_cache_cost(prepared.utilization, cost)
    return cost


async def record_failure(state: AppState, prepared: Prepared, error: ContextGateError) -> None:
    """Log a failed request; a failure to log must not hide the upstream error."""
    try:
        await record(
            state,
            prepared,
            answer=None,
            usage=None,
            cost=costs(prepared, 0.0, 0.0),
            outcome=Outcome("error", error.status_code, error.message[:2000]),
        )
    except Exception:
        logger.exception(
            "could not record a failed request", extra={"request_id": prepared.request_id}
        )


async def run_turn(state: AppState, context: TurnContext) -> TurnResult:
    prepared = await prepare(state, context)
    request = prepared.request
    try:
        # OpenAI's Responses API for the Responses door on OpenAI models, else the chat form.
        completion = await call_upstream(upstream_services(state), context, prepared)
    except ContextGateError as error:
        await record_failure(state, prepared, error)
        raise
    response = completion.response
    choices = response.get("choices") or []
    message = choices[0]["message"] if choices else {"role": "assistant", "content": ""}
    finish_reason = choices[0].get("finish_reason") if choices else None
    answer = answer_message(state, request.model, message)
    cost = turn_cost(
        prepared,
        completion.prompt_cost,
        completion.completion_cost,
        cache_read=completion.cache_read_cost,
        cache_write=completion.cache_write_cost,
    )
    await record(state, prepared, answer=answer, usage=completion.usage, cost=cost)
    return TurnResult(prepared, message, finish_reason, completion.usage, cost, response)
