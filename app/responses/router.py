"""The Responses door: POST /v1/responses, GET/DELETE /v1/responses/{id}, and its input items."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from app.context.headers import context_headers
from app.conversations.service import HeadMoved
from app.core.database import Database
from app.core.door_route import DoorRoute
from app.core.jsonresponse import json_response
from app.keys.auth import CallerDep
from app.protocol.limits import check_chat_limits
from app.responses.compaction_door import answer_trigger
from app.responses.compaction_items import trigger_index
from app.responses.create import NewResponse, build_turn
from app.responses.management import compact_threshold
from app.responses.objects import incomplete_reason
from app.responses.schemas import ResponsesRequest
from app.responses.service import response_service
from app.responses.truncation import refuse_overflow
from app.state import AppState, StateDep
from app.turns.context import TurnContext
from app.turns.guard import guarded
from app.turns.service import run_turn
from app.turns.stream import SSE_HEADERS, open_turn_stream

router = APIRouter(tags=["responses"], route_class=DoorRoute)


@router.post("/v1/responses", response_model=None)
async def create_response(
    body: ResponsesRequest,
    request: Request,
    caller: CallerDep,
    state: StateDep,
    x_conversation_id: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> Response:
    if body.conversation_id is None and x_conversation_id:
        body.conversation_id = x_conversation_id
    if isinstance(body.input, list) and trigger_index(body.input) is not None:
        payload = partial(body.model_dump, mode="json")
        answer = partial(answer_trigger, request, state, caller, body)
        return await guarded(request, state, caller, payload, idempotency_key, answer)
    notes: list[str] = []
    turn, at = await build_turn(state, caller, body, notes)
    check_chat_limits(state.settings, turn)
    await refuse_overflow(state, caller, body, turn)
    new = NewResponse(body, caller.tenant_id, notes=notes)
    if compact_threshold(body.context_management) is not None:
        new.sealing = state.settings
    context = TurnContext.of(
        request,
        turn,
        caller,
        on_record=new.record if body.store else None,
        # instructions apply to this request only (OpenAI: never carried over to the next)
        own_system_prompt=bool(body.instructions),
        continue_at=at,
        native=new.native,  # OpenAI's own Responses API for OpenAI models (app/turns/native.py)
    )
    return await guarded(
        request,
        state,
        caller,
        partial(body.model_dump, mode="json"),
        idempotency_key,
        lambda: _answer(state, context, new),
    )


async def _answer(state: AppState, context: TurnContext, new: NewResponse) -> Response:
    """Answer; a continuation of a conversation's end (previous_response_id) claims that end
    for its turn, and branches when another turn continues it already."""
    at, conversation_id = context.continue_at, context.request.conversation_id
    if at is None or conversation_id is None:
        return await _respond(state, context, new)
    head = (conversation_id, at)
    claims = state.continuations
    if not claims.claim(head):  # another turn of this process is continuing that end
        return await _respond(state, await _branched(state.database, context, head), new)
    try:
        try:
            response = await _respond(state, context, new)
        except HeadMoved:  # another replica's turn was stored there before this one was read
            branched = await _branched(state.database, context, head)
            response = await _respond(state, branched, new)
    except BaseException:
        claims.release(head)
        raise
    if isinstance(response, StreamingResponse):  # held until the stream is sent (or lapses)
        response.background = BackgroundTask(claims.release, head)
    else:
        claims.release(head)
    return response


async def _branched(database: Database, context: TurnContext, head: tuple[str, int]) -> TurnContext:
    """The same turn on a new branch holding the conversation's first ``head[1]`` messages."""
    branch = await response_service.branch(database, context.caller.tenant_id, *head)
    request = context.request.model_copy(update={"conversation_id": branch})
    return replace(context, request=request, continue_at=None)


async def _respond(state: AppState, context: TurnContext, new: NewResponse) -> Response:
    if context.request.stream:
        stream = await open_turn_stream(state, context, new.stream_renderer)
        prepared = stream.prepared
        headers = {
            **SSE_HEADERS,
            **context_headers(prepared.conversation_id, prepared.utilization),
        }
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
    result = await run_turn(state, context)
    result.prepared.utilization.notes.extend(new.notes)
    incomplete = incomplete_reason(result.finish_reason)
    if incomplete and new.output is not None:  # stored as completed: say why it stopped
        await response_service.mark_incomplete(
            state.database, context.caller.tenant_id, new.id, incomplete
        )
    headers = context_headers(result.conversation_id, result.prepared.utilization, result.cost)
    return json_response(new.body_of(result, incomplete), headers=headers)


@router.get("/v1/responses/{response_id}", response_model=None)
async def get_response(response_id: str, caller: CallerDep, state: StateDep) -> Response:
    record = await response_service.get(state.database, caller.tenant_id, response_id)
    headers = {"X-Conversation-Id": record.conversation_id}
    return json_response(response_service.to_object(record), headers=headers)


@router.delete("/v1/responses/{response_id}", response_model=None)
async def delete_response(response_id: str, caller: CallerDep, state: StateDep) -> Response:
    await response_service.delete(state.database, caller.tenant_id, response_id)
    return json_response({"id": response_id, "object": "response", "deleted": True})


@router.get("/v1/responses/{response_id}/input_items", response_model=None)
async def list_input_items(
    response_id: str,
    caller: CallerDep,
    state: StateDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Literal["asc", "desc"] = "desc",
    after: str | None = None,
) -> Response:
    record = await response_service.get(state.database, caller.tenant_id, response_id)
    items = list(record.input_items)
    if order == "desc":
        items.reverse()
    if after is not None:
        ids = [item.get("id") for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    page = items[:limit]
    return json_response(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
    )
