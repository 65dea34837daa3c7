"""Creating a response: the internal turn it becomes, and the record stored with the turn."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.messages import ConversationMessage
from app.core.errors import BadRequest
from app.core.settings import Settings
from app.db.models import utcnow
from app.keys.caller import Caller
from app.llm.native_responses import NativeRequest, native_chain
from app.llm.responses import Usage
from app.protocol.chat import ChatCompletionRequest
from app.responses.compaction_expand import expand_compaction
from app.responses.compaction_items import server_side_item
from app.responses.management import managed_context
from app.responses.native import NativeRenderer, client_output, native_request
from app.responses.objects import echo_fields, response_object
from app.responses.output import item_id, output_items, response_usage
from app.responses.references import record_output_items, resolve_request
from app.responses.render import ResponsesRenderer
from app.responses.repository import response_repository
from app.responses.schemas import ResponsesRequest
from app.responses.service import response_service
from app.responses.translate import chat_messages, chat_params, input_items
from app.state import AppState
from app.turns.prepared import Prepared
from app.turns.service import TurnResult
from app.wire.chat import ChatMessage
from app.wire.json import JSONObject
from app.wire.responses import CompactionItem, ResponseOutput

__all__ = ["NewResponse", "build_turn"]


async def build_turn(
    state: AppState, caller: Caller, body: ResponsesRequest, notes: list[str] | None = None
) -> tuple[ChatCompletionRequest, int | None]:
    """The request as one chat turn; ``previous_response_id`` continues (or branches): the
    stored length the conversation must still have for the turn to go on it (TurnContext's
    ``continue_at``), else None. ``notes`` gets what the door decided (management.py)."""
    notes = notes if notes is not None else []
    await resolve_request(
        state.database,
        caller.tenant_id,
        body,
        store_false_strict=state.settings.responses_store_false == "passthrough",
    )
    expansion = await expand_compaction(state, caller.tenant_id, body)
    if expansion is not None:  # continue the conversation the compaction item stands for
        body = expansion.body
        notes.append(expansion.note)
    messages = chat_messages(body)
    if expansion is not None and expansion.resent is not None:
        messages = [*messages, expansion.resent]
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
    params["context"], decided = managed_context(state.settings, body)
    notes.extend(decided)
    if expansion is not None:  # the client compacted: the prompt owner rebuilds the prompt now
        params["context"] = params["context"].model_copy(update={"rebase": True})
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
    echo: JSONObject = field(default_factory=dict)
    renderer: ResponsesRenderer | None = None
    output: list[ResponseOutput] | None = None  # as stored (ids included)
    notes: list[str] = field(default_factory=list)  # the door's decisions (management.py)
    # context_management: a compaction item closes the output when the turn compacted.
    sealing: Settings | None = None
    compacted: list[CompactionItem] | None = None
    # For OpenAI's own Responses API (app/turns/native.py); its output, when it answered.
    native: NativeRequest = field(default_factory=NativeRequest)

    def __post_init__(self) -> None:
        self.echo = echo_fields(self.body)
        self.native = native_request(self.body)

    def stream_renderer(self, prepared: Prepared) -> ResponsesRenderer:
        renderer = _NotingRenderer(
            encrypted=self.native.wants_encrypted_reasoning,
            response_id=self.id,
            created_at=self.created_at,
            echo=self.echo,
            conversation_id=prepared.conversation_id,
        )
        renderer.notes = self.notes
        renderer.more = self.compaction_output
        self.renderer = renderer
        return renderer

    def compaction_output(self, prepared: Prepared) -> list[CompactionItem]:
        """The compaction item the output ends with (context_management), made once."""
        if self.sealing is None:
            return []
        if self.compacted is None:
            item = server_side_item(self.sealing, self.tenant_id, prepared)
            self.compacted = [item] if item is not None else []
        return self.compacted

    def _output(self, message: ChatMessage) -> list[ResponseOutput]:
        """The output items of an answer not streamed: the provider's own when it answered
        natively, else rebuilt from the chat form."""
        if self.native.output is not None:
            return client_output(self.native.output, self.native.wants_encrypted_reasoning)
        return [*output_items(message)]

    async def record(
        self,
        session: AsyncSession,
        prepared: Prepared,
        answer: ConversationMessage,
        usage: Usage | None,
    ) -> None:
        """The RecordHook: store the response with the turn."""
        if self.renderer is not None:
            output = self.renderer.output(answer.thinking_blocks)  # as given
        else:
            output = self._output(cast(ChatMessage, answer.model_dump(exclude_none=True)))
        output += self.compaction_output(prepared)
        self.output = output
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
        await record_output_items(
            session,
            tenant_id=self.tenant_id,
            response_id=self.id,
            conversation_id=prepared.conversation_id,
            sequence_number=answer.sequence_number,
            output=self.output,
        )

    def body_of(self, result: TurnResult, incomplete: str | None) -> JSONObject:
        """The Response for a turn answered whole (not streamed), with its cost."""
        body = response_object(
            response_id=self.id,
            created_at=self.created_at,
            echo=self.echo,
            status="incomplete" if incomplete else "completed",
            output=self.output
            if self.output is not None
            else [*self._output(result.message), *self.compaction_output(result.prepared)],
            usage=response_usage(result.usage),
            conversation_id=result.conversation_id,
            context_utilization=result.prepared.utilization.model_dump(mode="json"),
            incomplete=incomplete,
        )
        return {**body, "cost": result.cost.model_dump()}


class _NotingRenderer(NativeRenderer):
    """Adds the door's notes to the final Response: after the turn is stored and observed, so
    that they say what was done without counting as a fallback (``context_degraded``); and
    the items that come after the answer's own (a ``compaction`` item)."""

    notes: list[str]
    more: Callable[[Prepared], list[CompactionItem]]

    def finish(self, result: TurnResult) -> list[bytes]:
        result.prepared.utilization.notes.extend(self.notes)
        extra: list[bytes] = []
        for item in self.more(result.prepared):
            if not self.native:
                extra += self.whole_item(item)
                continue
            index = max(self.done_items, default=-1) + 1  # after the provider's own items
            self.done_items[index] = item
            for kind in ("response.output_item.added", "response.output_item.done"):
                extra.append(self._event(kind, output_index=index, item=item))
        return [*extra, *super().finish(result)]
