"""The chat door's answers: a ``chat.completion`` body, and OpenAI's SSE stream.

The stream is: a role chunk, content / tool-call deltas, the finish reason, then one last
chunk with ``choices: []`` carrying ``conversation_id``, ``cost``, ``context_utilization``
(and ``usage`` when ``stream_options.include_usage``: exactly one chunk carries usage, as
OpenAI sends it), then ``data: [DONE]``.
"""

from __future__ import annotations

import time

import orjson

from app.core.errors import ContextGateError, error_body
from app.turns.prepared import Prepared
from app.turns.service import TurnResult
from app.wire.chat import ChatUsage
from app.wire.stream import ChatChunk, ChunkChoice, Delta

__all__ = ["ChatStreamRenderer", "completion_body"]

DONE = b"data: [DONE]\n\n"
_EMPTY_USAGE: ChatUsage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def sse(payload: object) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def completion_body(result: TurnResult) -> dict[str, object]:
    """The ``chat.completion`` with contextgate's fields beside OpenAI's."""
    return {**(result.completion or {}), **result.extensions()}


class ChatStreamRenderer:
    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.model = prepared.request.model
        self.chunk_id = f"chatcmpl-{prepared.request_id}"
        self.created = int(time.time())
        self.fingerprint: str | None = None
        self.role_sent: set[int] = set()
        self.usage: ChatUsage | None = None

    def _envelope(self, choices: list[ChunkChoice]) -> ChatChunk:
        chunk: ChatChunk = {
            "id": self.chunk_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.fingerprint:
            chunk["system_fingerprint"] = self.fingerprint
        return chunk

    def start(self) -> list[bytes]:
        return []

    def chunk(self, chunk: ChatChunk) -> list[bytes]:
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("system_fingerprint"):
            self.fingerprint = chunk["system_fingerprint"]
        out: list[ChunkChoice] = []
        for choice in chunk["choices"]:
            index, delta = choice["index"], Delta(**choice["delta"])
            delta.pop("role", None)
            delta.pop("thinking_blocks", None)  # not OpenAI's; kept in the stored answer
            if index not in self.role_sent:
                self.role_sent.add(index)
                delta = {"role": "assistant", **delta}
                if "content" not in delta and "tool_calls" not in delta:
                    delta["content"] = ""
            elif not delta and not choice.get("finish_reason"):
                continue
            out.append(
                {
                    "index": index,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": choice.get("finish_reason"),
                }
            )
        return [sse(self._envelope(out))] if out else []

    def finish(self, result: TurnResult) -> list[bytes]:
        last = self._envelope([])
        if self.prepared.request.include_usage:
            last["usage"] = self.usage or _EMPTY_USAGE
        return [sse({**last, **result.extensions()}), DONE]

    def fail(self, error: ContextGateError) -> list[bytes]:
        return [sse(error_body(error.message, error.error_type, error.code, error.param))]
