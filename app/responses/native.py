"""The Responses door's side of the native path (app/llm/native_responses.py).

A turn answered by OpenAI's own Responses API is rendered from the provider's output items, not
rebuilt from the chat form: reasoning items (``encrypted_content`` only when the client's
``include`` asks for it), hosted tool calls, messages with their annotations, function calls.
Streamed, the provider's typed events are passed on in order, renumbered; the
``response.*`` lifecycle events are contextgate's own, with its fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, Unpack

from app.llm.native_responses import NativeRequest
from app.responses.objects import ResponseStatus, incomplete_reason
from app.responses.output import response_usage
from app.responses.render import ResponsesRenderer
from app.responses.schemas import ResponsesRequest
from app.wire.chat import ThinkingBlockParam
from app.wire.json import JSONObject
from app.wire.responses import ResponseError, ResponseOutput, ResponsesUsage
from app.wire.stream import ChatChunk

if TYPE_CHECKING:
    from app.turns.service import TurnResult

__all__ = ["NativeRenderer", "client_output", "native_request"]

# The provider's lifecycle events: contextgate sends its own Response in their place.
_LIFECYCLE = frozenset(
    {
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.completed",
        "response.incomplete",
        "response.failed",
    }
)


def native_request(body: ResponsesRequest) -> NativeRequest:
    return NativeRequest.of(body.model_dump(mode="json", exclude_none=True))


def _for_client(item: JSONObject, encrypted: bool) -> JSONObject:
    if encrypted or item.get("type") != "reasoning" or "encrypted_content" not in item:
        return item
    return {key: value for key, value in item.items() if key != "encrypted_content"}


def client_output(items: list[JSONObject], encrypted: bool) -> list[ResponseOutput]:
    """The output items as the client gets them: encrypted reasoning only when it asked."""
    return [_for_client(item, encrypted) for item in items]


class RendererOpening(TypedDict):
    """What a ``ResponsesRenderer`` is opened with (its keyword parameters)."""

    response_id: str
    created_at: int
    echo: JSONObject
    conversation_id: str | None


class NativeRenderer(ResponsesRenderer):
    """A ResponsesRenderer that passes a native stream's typed events on; a turn that went
    through the chat form after all (no Responses API upstream) renders as its parent does."""

    def __init__(self, *, encrypted: bool, **opening: Unpack[RendererOpening]) -> None:
        super().__init__(**opening)
        self.encrypted = encrypted
        self.native = False
        self.done_items: dict[int, ResponseOutput] = {}
        self.cost: JSONObject | None = None  # contextgate's, on the final Response

    def chunk(self, chunk: ChatChunk) -> list[bytes]:
        event = chunk.get("responses_event")
        if not isinstance(event, dict):
            return super().chunk(chunk)
        self.native = True
        kind = str(event.get("type"))
        if kind in _LIFECYCLE:
            return []
        fields = {k: v for k, v in event.items() if k not in ("type", "sequence_number")}
        item = fields.get("item")
        if isinstance(item, dict):
            fields["item"] = _for_client(item, self.encrypted)
            if kind == "response.output_item.done":
                self.done_items[int(event.get("output_index") or 0)] = fields["item"]
        return [self._event(kind, **fields)]

    def output(self, thinking_blocks: list[ThinkingBlockParam] | None) -> list[ResponseOutput]:
        if not self.native:
            return super().output(thinking_blocks)
        return [self.done_items[index] for index in sorted(self.done_items)]

    def response(
        self,
        status: ResponseStatus,
        *,
        usage: ResponsesUsage | None = None,
        utilization: JSONObject | None = None,
        incomplete: str | None = None,
        error: ResponseError | None = None,
    ) -> JSONObject:
        body = super().response(
            status, usage=usage, utilization=utilization, incomplete=incomplete, error=error
        )
        if self.native and status != "in_progress":
            body["output"] = self.output(None)
        if self.cost is not None:
            body["cost"] = self.cost
        return body

    def finish(self, result: TurnResult) -> list[bytes]:
        self.cost = result.cost.model_dump()
        if not self.native:
            return super().finish(result)
        incomplete = incomplete_reason(result.finish_reason)
        self.conversation_id = result.conversation_id or self.conversation_id
        final = self.response(
            "incomplete" if incomplete else "completed",
            usage=response_usage(result.usage),
            utilization=result.prepared.utilization.model_dump(mode="json"),
            incomplete=incomplete,
        )
        kind = "response.incomplete" if incomplete else "response.completed"
        return [self._event(kind, response=final)]
