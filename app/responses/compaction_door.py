"""The two compaction forms of the Responses door, answered with contextgate's compaction.

- ``POST /v1/responses`` whose input ends with ``{"type": "compaction_trigger"}`` (Codex's
  ``remote_compaction_v2``): a Response whose only output item is a ``compaction`` item,
  streamed as OpenAI's typed events when asked;
- ``POST /v1/responses/compact`` (OpenAI's older form): a ``response.compaction`` object whose
  output is the input's user messages followed by one ``compaction`` item.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from app.core.door_route import DoorRoute
from app.core.jsonresponse import json_response
from app.core.settings import Settings
from app.db.models import new_id
from app.keys.auth import CallerDep
from app.keys.caller import Caller
from app.protocol.chat import AttachmentRef, ContextOptions
from app.protocol.limits import check_chat_limits
from app.responses.compaction import (
    Compacted,
    compact_conversation,
    compact_turn,
    log_compaction,
)
from app.responses.compaction_items import compaction_item
from app.responses.create import build_turn
from app.responses.objects import echo_fields, response_object
from app.responses.render import sse_event
from app.responses.schemas import InputItem, ResponsesRequest
from app.responses.service import response_service
from app.responses.translate import input_items, item_id
from app.state import AppState, StateDep
from app.turns.guard import guarded
from app.turns.stream import SSE_HEADERS
from app.wire.json import JSONObject
from app.wire.responses import CompactionItem

__all__ = ["CompactRequest", "answer_trigger", "router"]

router = APIRouter(tags=["responses"], route_class=DoorRoute)


async def _compact(
    http: Request, state: AppState, caller: Caller, body: ResponsesRequest
) -> Compacted:
    """Store the request's history (its input, or what previous_response_id names), compact
    it, and log the pass."""
    notes: list[str] = []
    if not body.input and body.previous_response_id is not None:
        start = await response_service.start_from(
            state.database, caller.tenant_id, body.previous_response_id, store=True
        )
        assert start.conversation_id is not None
        compacted = await compact_conversation(
            state, caller, start.conversation_id, body.model, body.context
        )
    else:
        turn, at = await build_turn(state, caller, body, notes)
        check_chat_limits(state.settings, turn)
        compacted = await compact_turn(
            state, caller, turn, at=at, own_system=bool(body.instructions)
        )
    compacted.notes[:0] = notes
    await log_compaction(
        state.database,
        caller,
        compacted,
        body,
        request_id=getattr(http.state, "request_id", None) or new_id("req"),
        started=getattr(http.state, "started", None) or time.perf_counter(),
    )
    return compacted


def _item(settings: Settings, caller: Caller, compacted: Compacted) -> CompactionItem:
    return compaction_item(settings, caller.tenant_id, item_id("cmp"), compacted.sealed)


async def answer_trigger(
    http: Request, state: AppState, caller: Caller, body: ResponsesRequest
) -> Response:
    """A Response with one ``compaction`` item for the history before the trigger."""
    assert isinstance(body.input, list)
    history = body.model_copy(update={"input": body.input[:-1]})
    compacted = await _compact(http, state, caller, history)
    response = response_object(
        response_id=item_id("resp"),
        created_at=int(time.time()),
        echo=echo_fields(body),
        status="completed",
        output=[_item(state.settings, caller, compacted)],
        usage=compacted.usage(),
        conversation_id=compacted.conversation_id,
        context_utilization=compacted.utilization(body.model),
    )
    headers = {"X-Conversation-Id": compacted.conversation_id}
    if not body.stream:
        return json_response(response, headers=headers)
    return StreamingResponse(
        iter(_events(response)),
        media_type="text/event-stream",
        headers={**SSE_HEADERS, **headers},
    )


def _events(response: JSONObject) -> list[bytes]:
    """The typed events of a Response that is complete already."""
    opened = {**response, "status": "in_progress", "output": [], "usage": None}
    kinds: list[tuple[str, dict[str, object]]] = [
        ("response.created", {"response": opened}),
        ("response.in_progress", {"response": opened}),
    ]
    for index, item in enumerate(response["output"]):
        kinds.append(("response.output_item.added", {"output_index": index, "item": item}))
        kinds.append(("response.output_item.done", {"output_index": index, "item": item}))
    kinds.append(("response.completed", {"response": response}))
    return [
        sse_event({"type": kind, "sequence_number": number, **fields})
        for number, (kind, fields) in enumerate(kinds)
    ]


class CompactRequest(BaseModel):
    """``POST /v1/responses/compact``, plus contextgate's extensions."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation_id: str | None = None
    attachments: list[AttachmentRef] = Field(default_factory=list)
    context: ContextOptions = Field(default_factory=ContextOptions)

    def as_request(self) -> ResponsesRequest:
        return ResponsesRequest(
            model=self.model,
            input=self.input or [],
            instructions=self.instructions,
            previous_response_id=self.previous_response_id,
            conversation_id=self.conversation_id,
            context=self.context,
        )


@router.post("/v1/responses/compact", response_model=None)
async def compact_response(
    body: CompactRequest,
    request: Request,
    caller: CallerDep,
    state: StateDep,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> Response:
    responses_request = body.as_request()

    async def answer() -> Response:
        compacted = await _compact(request, state, caller, responses_request)
        users = [
            item
            for item in input_items(responses_request)
            if item.get("type") == "message" and item.get("role") == "user"
        ]
        payload = {
            "id": item_id("resp"),
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*users, _item(state.settings, caller, compacted)],
            "usage": compacted.usage(),
            "conversation_id": compacted.conversation_id,
            "context_utilization": compacted.utilization(body.model),
        }
        headers = {"X-Conversation-Id": compacted.conversation_id}
        return json_response(payload, headers=headers)

    payload = partial(body.model_dump, mode="json")
    return await guarded(request, state, caller, payload, idempotency_key, answer)
