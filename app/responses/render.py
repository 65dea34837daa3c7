"""The Responses stream: OpenAI's typed SSE events, each with its ``sequence_number``.

response.created, response.in_progress; per output item: response.output_item.added, then
reasoning summary / content part / text / function-call-argument deltas and their .done
events, response.output_item.done; finally response.completed (or response.incomplete), or
response.failed when the upstream fails mid-stream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypedDict, Unpack

import orjson

from app.core.errors import ContextGateError
from app.responses.objects import ResponseStatus, incomplete_reason, response_object
from app.responses.output import (
    encode_reasoning,
    function_call_item,
    item_id,
    message_item,
    reasoning_item,
    response_usage,
)
from app.turns.accumulate import add_thinking
from app.wire.chat import ThinkingBlockParam, ToolCall
from app.wire.json import JSONObject
from app.wire.responses import (
    EventFields,
    ItemStatus,
    MessageItem,
    OutputTextPart,
    ResponseError,
    ResponseOutput,
    ResponsesEvent,
    ResponsesUsage,
    SummaryText,
)
from app.wire.stream import ChatChunk, Delta, ToolCallDelta

if TYPE_CHECKING:
    from app.turns.service import TurnResult

__all__ = ["ResponsesRenderer", "sse_event"]


def sse_event(payload: Mapping[str, object]) -> bytes:
    kind = str(payload["type"]).encode()
    return b"event: " + kind + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class _Where(TypedDict):
    """Which output item an event is about."""

    item_id: str
    output_index: int


class _Item:
    """One output item being streamed."""

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind  # reasoning | message | function_call
        self.index = index
        self.id = item_id({"reasoning": "rs", "message": "msg", "function_call": "fc"}[kind])
        self.text: list[str] = []
        self.thinking_blocks: list[ThinkingBlockParam] = []
        self.call: ToolCall = {
            "id": None,
            "type": "function",
            "function": {"name": "", "arguments": ""},
        }
        self.done = False

    def body(self, status: ItemStatus) -> ResponseOutput:
        if self.kind == "reasoning":
            data = reasoning_item(self.id, "".join(self.text), None)
            if self.thinking_blocks:
                data["encrypted_content"] = encode_reasoning(self.thinking_blocks)
            return data
        if self.kind == "message":
            return message_item(self.id, "".join(self.text), status)
        return function_call_item(self.id, self.call, status)


class _WholeItem(_Item):
    """An item that arrives whole (``whole_item``): done from the start, its body as given."""

    def __init__(self, whole: ResponseOutput, index: int) -> None:
        super().__init__("message", index)
        self.kind, self.id, self.done = str(whole["type"]), str(whole["id"]), True
        self.whole = whole

    def body(self, status: ItemStatus) -> ResponseOutput:
        return self.whole


class ResponsesRenderer:
    """A StreamRenderer (app.turns.stream) for ``POST /v1/responses`` with ``stream: true``."""

    def __init__(
        self,
        *,
        response_id: str,
        created_at: int,
        echo: JSONObject,
        conversation_id: str | None,
    ) -> None:
        self.response_id = response_id
        self.created_at = created_at
        self.echo = echo
        self.conversation_id = conversation_id
        self.sequence = 0
        self.items: list[_Item] = []
        self.calls: dict[int, _Item] = {}
        self.finish_reason: str | None = None

    # ---- events ----------------------------------------------------------------------
    def _event(self, kind: str, **fields: Unpack[EventFields]) -> bytes:
        payload: ResponsesEvent = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse_event(payload)

    def response(
        self,
        status: ResponseStatus,
        *,
        usage: ResponsesUsage | None = None,
        utilization: JSONObject | None = None,
        incomplete: str | None = None,
        error: ResponseError | None = None,
    ) -> JSONObject:
        done = status != "in_progress"
        return response_object(
            response_id=self.response_id,
            created_at=self.created_at,
            echo=self.echo,
            status=status,
            output=[item.body("completed" if done else "in_progress") for item in self.items]
            if done
            else [],
            usage=usage,
            conversation_id=self.conversation_id,
            context_utilization=utilization,
            incomplete=incomplete,
            error=error,
        )

    # ---- StreamRenderer ---------------------------------------------------------------
    def start(self) -> list[bytes]:
        opened = self.response("in_progress")
        return [
            self._event("response.created", response=opened),
            self._event("response.in_progress", response=opened),
        ]

    def chunk(self, chunk: ChatChunk) -> list[bytes]:
        out: list[bytes] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            if delta.get("reasoning_content") or delta.get("thinking_blocks"):
                out += self._reasoning(delta)
            if delta.get("content"):
                out += self._text(delta["content"])
            for call in delta.get("tool_calls") or ():
                out += self._tool_call(call)
        return out

    def output(self, thinking_blocks: list[ThinkingBlockParam] | None) -> list[ResponseOutput]:
        """The output items as they stand (the answer has fully arrived): what is stored."""
        for item in self.items:
            if item.kind == "reasoning" and thinking_blocks:
                item.thinking_blocks = thinking_blocks  # the pipeline's copy is the stored one
        return [item.body("completed") for item in self.items]

    def finish(self, result: TurnResult) -> list[bytes]:
        """The turn (and the response record with it) is stored: close what is open, then
        response.completed (or response.incomplete) with the whole Response."""
        self.output(result.message.get("thinking_blocks"))
        out = self._close_all()
        incomplete = incomplete_reason(result.finish_reason)
        self.conversation_id = result.conversation_id or self.conversation_id
        final = self.response(
            "incomplete" if incomplete else "completed",
            usage=response_usage(result.usage),
            utilization=result.prepared.utilization.model_dump(mode="json"),
            incomplete=incomplete,
        )
        kind = "response.incomplete" if incomplete else "response.completed"
        return [*out, self._event(kind, response=final)]

    def fail(self, error: ContextGateError) -> list[bytes]:
        # A Response's error code is one of OpenAI's few; ours travels in the message.
        code = "rate_limit_exceeded" if error.status_code == 429 else "server_error"
        message = f"{error.message} ({error.code})" if error.code else error.message
        failed = self.response("failed", error={"code": code, "message": message})
        return [self._event("response.failed", response=failed)]

    # ---- items -------------------------------------------------------------------------
    def _open(
        self, kind: str, setup: Callable[[_Item], None] | None = None
    ) -> tuple[_Item, list[bytes]]:
        out = self._close_all(keep_calls=kind == "function_call")
        item = _Item(kind, len(self.items))
        if setup is not None:
            setup(item)
        self.items.append(item)
        out.append(
            self._event(
                "response.output_item.added", output_index=item.index, item=self._added_body(item)
            )
        )
        return item, out

    def _added_body(self, item: _Item) -> ResponseOutput:
        if item.kind == "message":  # its text comes in the content part events
            opened: MessageItem = {
                "id": item.id,
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            return opened
        return item.body("in_progress")

    def _current(self, kind: str) -> _Item | None:
        last = self.items[-1] if self.items else None
        return last if last is not None and last.kind == kind and not last.done else None

    def _reasoning(self, delta: Delta) -> list[bytes]:
        out: list[bytes] = []
        item = self._current("reasoning")
        if item is None:
            item, out = self._open("reasoning")
            out.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    item_id=item.id,
                    output_index=item.index,
                    summary_index=0,
                    part={"type": "summary_text", "text": ""},
                )
            )
        for block in delta.get("thinking_blocks") or ():
            add_thinking(item.thinking_blocks, block)
        text = delta.get("reasoning_content")
        if text:
            item.text.append(text)
            out.append(
                self._event(
                    "response.reasoning_summary_text.delta",
                    item_id=item.id,
                    output_index=item.index,
                    summary_index=0,
                    delta=text,
                )
            )
        return out

    def _text(self, text: str) -> list[bytes]:
        out: list[bytes] = []
        item = self._current("message")
        if item is None:
            item, out = self._open("message")
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=item.id,
                    output_index=item.index,
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                )
            )
        item.text.append(text)
        out.append(
            self._event(
                "response.output_text.delta",
                item_id=item.id,
                output_index=item.index,
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return out

    def _tool_call(self, call: ToolCallDelta) -> list[bytes]:
        out: list[bytes] = []
        position = int(call.get("index", 0))
        function = call.get("function") or {}
        item = self.calls.get(position)
        if item is None:

            def setup(new: _Item) -> None:  # the added event names the call as known so far
                new.call["id"] = call.get("id")  # None until the stream names it
                new.call["function"]["name"] = function.get("name") or ""

            item, out = self._open("function_call", setup)
            self.calls[position] = item
        elif function.get("name"):
            item.call["function"]["name"] += function["name"]
        arguments = function.get("arguments")
        if arguments:
            item.call["function"]["arguments"] += arguments
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item.id,
                    output_index=item.index,
                    delta=arguments,
                )
            )
        return out

    def whole_item(self, body: ResponseOutput) -> list[bytes]:
        """An output item complete as it appears (a ``compaction`` item): its events."""
        out = self._close_all()
        item = _WholeItem(body, len(self.items))
        self.items.append(item)
        out.append(self._event("response.output_item.added", output_index=item.index, item=body))
        out.append(self._event("response.output_item.done", output_index=item.index, item=body))
        return out

    def _close_all(self, *, keep_calls: bool = False) -> list[bytes]:
        out: list[bytes] = []
        for item in self.items:
            if item.done or (keep_calls and item.kind == "function_call"):
                continue
            out += self._close(item)
        return out

    def _close(self, item: _Item) -> list[bytes]:
        item.done = True
        text = "".join(item.text)
        common: _Where = {"item_id": item.id, "output_index": item.index}
        out: list[bytes] = []
        if item.kind == "reasoning":
            part: SummaryText = {"type": "summary_text", "text": text}
            out.append(
                self._event(
                    "response.reasoning_summary_text.done", **common, summary_index=0, text=text
                )
            )
            out.append(
                self._event(
                    "response.reasoning_summary_part.done", **common, summary_index=0, part=part
                )
            )
        elif item.kind == "message":
            text_part: OutputTextPart = {"type": "output_text", "text": text, "annotations": []}
            out.append(
                self._event(
                    "response.output_text.done", **common, content_index=0, text=text, logprobs=[]
                )
            )
            out.append(
                self._event("response.content_part.done", **common, content_index=0, part=text_part)
            )
        else:
            function = item.call["function"]
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    **common,
                    name=function["name"],
                    arguments=function["arguments"],
                )
            )
        out.append(
            self._event(
                "response.output_item.done", output_index=item.index, item=item.body("completed")
            )
        )
        return out
