"""The Anthropic door: POST /v1/messages and POST /v1/messages/count_tokens.

Parse and validate Anthropic's request (errors in Anthropic's envelope: main.py installs it
for this path), translate it into the internal turn, run it through the shared pipeline and
render the answer as Anthropic's ``message`` or its SSE events. ``x-api-key`` or
``Authorization: Bearer`` authenticate (app.keys.auth); ``anthropic-version`` and
``anthropic-beta`` go on to the upstream when it is Anthropic (without the context editing
betas: contextgate does the editing itself, app/messages/context_editing.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Body, Header, Request
from fastapi.responses import Response, StreamingResponse

from app.context.budget import count_tools
from app.context.headers import context_headers
from app.core.door_route import DoorRoute
from app.core.jsonresponse import json_response
from app.keys.auth import CallerDep
from app.messages.answer import message_id
from app.messages.body import MessagesBody
from app.messages.context_editing import (
    AppliedEdits,
    ContextManagement,
    applied_edits,
    edited_context,
    request_budget,
    upstream_beta,
)
from app.messages.render import AnthropicStreamRenderer, message_body
from app.messages.schemas import CountTokensRequest
from app.messages.translate import chat_messages, chat_tools, to_turn_request
from app.protocol.limits import check_chat_limits, check_message_sizes
from app.state import AppState, StateDep
from app.tokens.counter import TokenCounter
from app.turns.context import TurnContext
from app.turns.guard import guarded
from app.turns.prepared import Prepared
from app.turns.service import run_turn
from app.turns.stream import SSE_HEADERS, open_turn_stream

__all__ = ["ERROR_PREFIX", "router"]

router = APIRouter(tags=["messages"], route_class=DoorRoute)

ERROR_PREFIX = "/v1/messages"  # errors under it are in Anthropic's envelope
PASSED_HEADERS = ("anthropic-version", "anthropic-beta")


def _upstream_headers(request: Request) -> dict[str, str]:
    headers = {name: request.headers[name] for name in PASSED_HEADERS if name in request.headers}
    if "anthropic-beta" in headers:
        beta = upstream_beta(headers.pop("anthropic-beta"))
        if beta is not None:
            headers["anthropic-beta"] = beta
    return headers


EditReport = Callable[[Prepared], AppliedEdits]


def _edit_report(tokens: TokenCounter, management: ContextManagement | None) -> EditReport | None:
    """What renders ``context_management`` for the answer, when the request asked for edits."""
    if management is None:
        return None

    def report(prepared: Prepared) -> AppliedEdits:
        # The client resends its older thinking on every call: each text is counted once.
        model = prepared.request.model
        return applied_edits(management, prepared, lambda t: tokens.count_cached(t, model))

    return report


@router.post("/v1/messages", response_model=None)
async def create_message(
    parsed: Annotated[MessagesBody, Body()],
    request: Request,
    caller: CallerDep,
    state: StateDep,
    x_conversation_id: Annotated[str | None, Header()] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> Response:
    body = parsed.request
    if body.conversation_id is None and x_conversation_id:
        body.conversation_id = x_conversation_id
    turn = to_turn_request(body, parsed.chat)
    check_chat_limits(state.settings, turn)
    management = body.context_management
    if management is not None:
        turn.context = edited_context(
            management,
            turn.context,
            request_budget(state.settings, state.llm, turn),
            new_user_turn=turn.messages[-1].role == "user",
        )
    context = TurnContext.of(request, turn, caller, upstream_headers=_upstream_headers(request))
    report = _edit_report(state.tokens, management)
    return await guarded(
        request,
        state,
        caller,
        lambda: parsed.validated().model_dump(mode="json"),
        idempotency_key,
        lambda: _answer(state, context, report),
    )


async def _answer(state: AppState, context: TurnContext, report: EditReport | None) -> Response:
    msg_id = message_id(context.request_id)
    if context.request.stream:

        def renderer(prepared: Prepared) -> AnthropicStreamRenderer:
            return AnthropicStreamRenderer(prepared, msg_id, report)

        stream = await open_turn_stream(state, context, renderer)
        prepared = stream.prepared
        headers = {
            **SSE_HEADERS,
            **context_headers(prepared.conversation_id, prepared.utilization),
        }
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
    result = await run_turn(state, context)
    headers = context_headers(result.conversation_id, result.prepared.utilization, result.cost)
    edits = report(result.prepared) if report is not None else None
    return json_response(message_body(result, msg_id, edits), headers=headers)


@router.post("/v1/messages/count_tokens", response_model=None)
async def count_tokens(body: CountTokensRequest, caller: CallerDep, state: StateDep) -> Response:
    """What the request would cost in input tokens, by our counter (nothing is stored).

    Capped and counted as a turn is: one message over CONTEXTGATE_MAX_MESSAGE_CHARS is a 413,
    and the large texts (messages, tools) are counted in the token pool, off the event loop."""
    messages = chat_messages(body)
    check_message_sizes(state.settings, messages)
    counter, model = state.tokens, body.model
    total = await counter.count_messages_async(messages, model)
    total += await count_tools(counter, chat_tools(body), model)
    return json_response({"input_tokens": total})
