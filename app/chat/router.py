"""The chat door: POST /v1/chat/completions (OpenAI's Chat Completions, plus extensions)."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import Response, StreamingResponse

from app.chat.render import ChatStreamRenderer, completion_body
from app.context.headers import context_headers
from app.core.door_route import DoorRoute
from app.core.jsonresponse import json_response
from app.keys.auth import CallerDep
from app.protocol.chat import ChatCompletionRequest
from app.protocol.limits import check_chat_limits
from app.state import AppState, StateDep
from app.turns.context import TurnContext
from app.turns.guard import guarded
from app.turns.service import run_turn
from app.turns.stream import SSE_HEADERS, open_turn_stream

router = APIRouter(tags=["chat"], route_class=DoorRoute)


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    caller: CallerDep,
    state: StateDep,
    x_conversation_id: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> Response:
    if body.conversation_id is None and x_conversation_id:
        body.conversation_id = x_conversation_id
    check_chat_limits(state.settings, body)
    context = TurnContext.of(request, body, caller)
    return await guarded(
        request,
        state,
        caller,
        partial(body.model_dump, mode="json"),
        idempotency_key,
        lambda: _answer(state, context),
    )


async def _answer(state: AppState, context: TurnContext) -> Response:
    if context.request.stream:
        stream = await open_turn_stream(state, context, ChatStreamRenderer)
        prepared = stream.prepared
        headers = {
            **SSE_HEADERS,
            **context_headers(prepared.conversation_id, prepared.utilization),
        }
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
    result = await run_turn(state, context)
    headers = context_headers(result.conversation_id, result.prepared.utilization, result.cost)
    return json_response(completion_body(result), headers=headers)
