"""The Anthropic door's answers: a ``message`` body, and Anthropic's SSE event stream.

The stream is what the Anthropic SDK expects: ``message_start``, ``ping``, then per content
block ``content_block_start`` / ``content_block_delta``* / ``content_block_stop`` (thinking with
``thinking_delta`` and ``signature_delta``, text with ``text_delta``, tool use with
``input_json_delta``), then ``message_delta`` (stop reason, usage, ``context_management``
when the request asked for context editing, and contextgate's ``conversation_id`` /
``context_utilization``) and ``message_stop``; a failure is an ``error``
event. Upstream chat chunks are turned into blocks as they come: a block closes when the next
kind starts (thinking closes once signed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import orjson

from app.messages.answer import anthropic_content, anthropic_usage, stop_reason
from app.messages.context_editing import AppliedEdits
from app.messages.errors import anthropic_error_body
from app.messages.types import ThinkingFields
from app.wire.anthropic import (
    AnthropicMessage,
    ContentBlock,
    ContentBlockDelta,
    ContentBlockDeltaEvent,
    ContentBlockStartEvent,
    ContentBlockStopEvent,
    InputJSONDelta,
    MessageDeltaEvent,
    ToolUseBlock,
)
from app.wire.chat import ThinkingBlockParam
from app.wire.stream import ChatChunk, ToolCallDelta

if TYPE_CHECKING:
    from app.core.errors import ContextGateError
    from app.turns.prepared import Prepared
    from app.turns.service import TurnResult

__all__ = ["AnthropicStreamRenderer", "event", "message_body"]


def event(name: str, payload: Mapping[str, object]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def _stop_reason(result: TurnResult) -> str:
    return stop_reason(result.finish_reason, has_tool_calls=bool(result.message.get("tool_calls")))


def message_body(
    result: TurnResult, message_id: str, context_management: AppliedEdits | None = None
) -> dict[str, object]:
    """Anthropic's ``message`` for a finished turn, plus contextgate's fields;
    ``context_management``: the applied edits, when the request asked for context editing."""
    edits = {} if context_management is None else {"context_management": context_management}
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": result.prepared.request.model,
        "content": anthropic_content(result.message),
        "stop_reason": _stop_reason(result),
        "stop_sequence": None,
        "usage": anthropic_usage(result.usage.raw if result.usage else None),
        **edits,
        **result.extensions(),
    }


class AnthropicStreamRenderer:
    def __init__(
        self,
        prepared: Prepared,
        message_id: str,
        edits: Callable[[Prepared], AppliedEdits] | None = None,
    ) -> None:
        self.prepared = prepared
        self.message_id = message_id
        self.edits = edits  # renders ``context_management`` for the final message_delta
        self.index = -1  # the newest block's index
        self.open: str | None = None  # "thinking", "text", "tool" or None
        self.signed = False  # the open thinking block has its signature
        self.tools: dict[int, int] = {}  # upstream tool call index -> block index

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> list[bytes]:
        message: AnthropicMessage = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.prepared.request.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.prepared.utilization.tokens_used,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        return [
            event("message_start", {"type": "message_start", "message": message}),
            event("ping", {"type": "ping"}),
        ]

    def chunk(self, chunk: ChatChunk) -> list[bytes]:
        out: list[bytes] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            blocks = delta.get("thinking_blocks")
            if blocks:
                for block in blocks:
                    out += self._thinking(block)
            elif delta.get("reasoning_content"):
                out += self._thinking({"type": "thinking", "thinking": delta["reasoning_content"]})
            if delta.get("content"):
                out += self._text(delta["content"])
            for call in delta.get("tool_calls") or ():
                out += self._tool(call)
        return out

    def finish(self, result: TurnResult) -> list[bytes]:
        out = self._close()
        usage = anthropic_usage(result.usage.raw if result.usage else None)
        delta: MessageDeltaEvent = {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(result), "stop_sequence": None},
            "usage": usage,
        }
        if self.edits is not None:
            delta["context_management"] = self.edits(result.prepared)
        out.append(event("message_delta", {**delta, **result.extensions()}))
        out.append(event("message_stop", {"type": "message_stop"}))
        return out

    def fail(self, error: ContextGateError) -> list[bytes]:
        return [event("error", anthropic_error_body(error))]

    # ---- blocks -------------------------------------------------------------------------

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        self.open = None
        stop: ContentBlockStopEvent = {"type": "content_block_stop", "index": self.index}
        return [event("content_block_stop", stop)]

    def _start(self, kind: str, block: ContentBlock) -> list[bytes]:
        out = self._close()
        self.index += 1
        self.open = kind
        payload: ContentBlockStartEvent = {
            "type": "content_block_start",
            "index": self.index,
            "content_block": block,
        }
        out.append(event("content_block_start", payload))
        return out

    def _delta(self, index: int, delta: ContentBlockDelta) -> bytes:
        payload: ContentBlockDeltaEvent = {
            "type": "content_block_delta",
            "index": index,
            "delta": delta,
        }
        return event("content_block_delta", payload)

    def _thinking(self, block: ThinkingBlockParam) -> list[bytes]:
        out: list[bytes] = []
        fields = cast(ThinkingFields, block)  # as the provider sent it
        if fields.get("type") == "redacted_thinking":
            data = cast(str, fields.get("data"))  # as it came, byte for byte
            out += self._start("redacted", {"type": "redacted_thinking", "data": data})
            return out + self._close()
        if self.open != "thinking" or self.signed:
            out += self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            self.signed = False
        if fields.get("thinking"):
            thinking = fields["thinking"]
            out.append(self._delta(self.index, {"type": "thinking_delta", "thinking": thinking}))
        if fields.get("signature"):
            signature = fields["signature"]
            out.append(self._delta(self.index, {"type": "signature_delta", "signature": signature}))
            self.signed = True
        return out

    def _text(self, text: str) -> list[bytes]:
        out = [] if self.open == "text" else self._start("text", {"type": "text", "text": ""})
        out.append(self._delta(self.index, {"type": "text_delta", "text": text}))
        return out

    def _tool(self, call: ToolCallDelta) -> list[bytes]:
        position = int(call.get("index", 0))
        function = call.get("function") or {}
        out: list[bytes] = []
        if position not in self.tools:
            block: ToolUseBlock = {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": function.get("name") or "",
                "input": {},
            }
            out += self._start("tool", block)
            self.tools[position] = self.index
        if function.get("arguments"):
            json_delta: InputJSONDelta = {
                "type": "input_json_delta",
                "partial_json": function["arguments"],
            }
            out.append(self._delta(self.tools[position], json_delta))
        return out
