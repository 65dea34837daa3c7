"""POST /v1/chat/completions, non-streaming: prepare, call upstream, record, answer."""

from __future__ import annotations

import logging
from typing import Any

from app.chat.models import ChatContext
from app.chat.pipeline import Prepared, answer_message, costs, prepare, record
from app.core.errors import ContextGateError
from app.core.state import AppState

__all__ = ["complete_chat", "response_extensions"]

logger = logging.getLogger(__name__)


def response_extensions(prepared: Prepared, cost: Any) -> dict[str, Any]:
    return {
        "conversation_id": prepared.conversation_id,
        "cost": cost.model_dump(),
        "context_utilization": prepared.utilization.model_dump(mode="json"),
    }


async def record_failure(state: AppState, prepared: Prepared, error: ContextGateError) -> None:
    """Log a failed request; a failure to log must not hide the upstream error."""
    try:
        await record(
            state,
            prepared,
            answer=None,
            usage=None,
            cost=costs(prepared, 0.0, 0.0),
            status="error",
            status_code=error.status_code,
            error=error.message[:2000],
        )
    except Exception:
        logger.exception(
            "could not record a failed request", extra={"request_id": prepared.request_id}
        )


async def complete_chat(state: AppState, context: ChatContext) -> dict[str, Any]:
    prepared = await prepare(state, context)
    request = prepared.request
    try:
        completion = await state.llm.complete(
            request.model, prepared.messages, request.forwarded_params()
        )
    except ContextGateError as error:
        await record_failure(state, prepared, error)
        raise
    response = completion.response
    choices = response.get("choices") or []
    message = choices[0]["message"] if choices else {"role": "assistant", "content": ""}
    answer = answer_message(state, request.model, message)
    cost = costs(prepared, completion.prompt_cost, completion.completion_cost)
    await record(state, prepared, answer=answer, usage=completion.usage, cost=cost)
    response.update(response_extensions(prepared, cost))
    return response
