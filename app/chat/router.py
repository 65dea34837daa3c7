"""HTTP surface of chat: POST /v1/chat/completions."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import Response, StreamingResponse

from app.chat.guard import guarded
from app.chat.models import ChatContext
from app.chat.pipeline import new_request_id
from app.chat.service import complete_chat
from app.chat.streaming import open_stream
from app.core.deps import CallerDep, StateDep
from app.core.jsonresponse import json_response
from app.core.limits import check_chat_limits
from app.core.state import AppState
from app.protocol.chat import ChatCompletionRequest

router = APIRouter(tags=["chat"])


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
    context = ChatContext(
        request=body,
        caller=caller,
        request_id=getattr(request.state, "request_id", None) or new_request_id(),
        started=getattr(request.state, "started", None) or time.perf_counter(),
    )
    return await guarded(
        request, state, caller, body, idempotency_key, lambda: _answer(state, context)
    )


async def _answer(state: AppState, context: ChatContext) -> Response:
    body = context.request
    if body.stream:
        prepared, events = await open_stream(state, context)
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        if prepared.conversation_id:
            headers["X-Conversation-Id"] = prepared.conversation_id
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)
    payload = await complete_chat(state, context)
    headers = {}
    if payload.get("conversation_id"):
        headers["X-Conversation-Id"] = payload["conversation_id"]
    return json_response(payload, headers=headers)
