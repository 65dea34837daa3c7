"""Creating a response: the internal turn it becomes, and the record stored with the turn."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.messages import ConversationMessage
from app.core.errors import BadRequest
from app.core.state import AppState
from app.db.models import utcnow
from app.keys.auth import Caller
from app.llm.native_responses import NativeRequest, native_chain
from app.llm.responses import Usage
from app.protocol.chat import ChatCompletionRequest
from app.responses.native import NativeRenderer, client_output, native_request
from app.responses.objects import echo_fields, response_object
from app.responses.render import ResponsesRenderer
from app.responses.repository import response_repository
from app.responses.schemas import ResponsesRequest
from app.responses.service import response_service
from app.responses.translate import (
    chat_messages,
    chat_params,
    input_items,
    item_id,
    output_items,
    response_usage,
)
from app.turns.pipeline import Prepared
from app.turns.service import TurnResult

__all__ = ["NewResponse", "build_turn"]


async def build_turn(
    state: AppState, caller: Caller, body: ResponsesRequest
) -> tuple[ChatCompletionRequest, int | None]:
    """The request as one chat turn; ``previous_response_id`` continues (or branches): the
    stored length the conversation must still have for the turn to go on it (TurnContext's
    ``continue_at``), else None."""
    messages = chat_messages(body)
    params = chat_params(body, native=native_chain(state.llm, body.model, state.settings))
    at: int | None = None
    if body.previous_response_id is not None:
        if body.conversation_id is not None:
            raise BadRequest(
                "Send either previous_response_id or conversation_id, not both.",
                param="conversation_id",
            )
        start = await response_service.start_from(
            state.database, caller.tenant_id, body.previous_response_id, store=body.store
        )
        if start.conversation_id is not None:
            params["conversation_id"] = start.conversation_id
            at = start.at
        else:  # store=false: the stored history is sent as it is, nothing is stored
            system = messages[:1] if body.instructions else []
            messages = [*system, *start.history, *messages[len(system) :]]
    if not body.store and state.settings.responses_store_false == "passthrough":
        params["context"] = body.context.model_copy(update={"enabled": False})
    if not messages:
        raise BadRequest("'input' must not be empty.", param="input", code="empty_input")
    try:
        turn = ChatCompletionRequest.model_validate(
            {"model": body.model, "messages": messages, **params}
        )
    except ValidationError as error:
        first = error.errors()[0]
        raise BadRequest(f"Invalid input: {first.get('msg')}", param="input") from None
    return turn, at


@dataclass(slots=True)
class NewResponse:
    """One response being created: its id, what it echoes, and its record, which is written
    in the transaction that stores the turn (``on_record``), so a client that has the answer
    can continue from it at once."""

    body: ResponsesRequest
    tenant_id: str
    id: str = field(default_factory=lambda: item_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))
    echo: dict[str, Any] = field(default_factory=dict)
    renderer: ResponsesRenderer | None = None
    output: list[dict[str, Any]] | None = None  # as stored (ids included)
    # For OpenAI's own Responses API (app/turns/native.py); its output, when it answered.
    native: NativeRequest = field(default_factory=NativeRequest)

    def __post_init__(self) -> None:
        self.echo = echo_fields(self.body)
        self.native = native_request(self.body)

    def stream_renderer(self, prepared: Prepared) -> ResponsesRenderer:
        self.renderer = NativeRenderer(
            encrypted=self.native.wants_encrypted_reasoning,
            response_id=self.id,
            created_at=self.created_at,
            echo=self.echo,
            conversation_id=prepared.conversation_id,
        )
        return self.renderer

    def _output(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The output items of an answer not streamed: the provider's own when it answered
        natively, else rebuilt from the chat form."""
        if self.native.output is not None:
            return client_output(self.native.output, self.native.wants_encrypted_reasoning)
        return output_items(message)

    async def record(
        self,
        session: AsyncSession,
        prepared: Prepared,
        answer: ConversationMessage,
        usage: Usage | None,
    ) -> None:
        """The RecordHook: store the response with the turn."""
        message = answer.model_dump(exclude_none=True)
        if self.renderer is not None:
            self.output = self.renderer.output(answer.thinking_blocks)
        else:
            self.output = self._output(message)
        assert prepared.conversation_id is not None
        await response_repository.insert(
            session,
            {
                "id": self.id,
                "tenant_id": self.tenant_id,
                "conversation_id": prepared.conversation_id,
                "end_sequence": answer.sequence_number + 1,
                "model": self.body.model,
                "status": "completed" if answer.status == "complete" else "incomplete",
                "output": self.output,
                "usage": response_usage(usage),
                "input_items": input_items(self.body),
                # Kept beside the echo so that GET answers the request's report too.
                "echo": {
                    **self.echo,
                    "context_utilization": prepared.utilization.model_dump(mode="json"),
                },
                "incomplete_reason": None,
                "created_at": utcnow(),
            },
        )

    def body_of(self, result: TurnResult, incomplete: str | None) -> dict[str, Any]:
        """The Response for a turn answered whole (not streamed), with its cost."""
        body = response_object(
            response_id=self.id,
            created_at=self.created_at,
            echo=self.echo,
            status="incomplete" if incomplete else "completed",
            output=self.output if self.output is not None else self._output(result.message),
            usage=response_usage(result.usage),
            conversation_id=result.conversation_id,
            context_utilization=result.prepared.utilization.model_dump(mode="json"),
            incomplete=incomplete,
        )
        return {**body, "cost": result.cost.model_dump()}
