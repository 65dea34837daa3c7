"""The chat door's answers: a ``chat.completion`` body, and OpenAI's SSE stream.

The stream is: a role chunk, content / tool-call deltas, the finish reason, then one last
chunk with ``choices: []`` carrying ``conversation_id``, ``cost``, ``context_utilization``
(and ``usage`` when ``stream_options.include_usage``: exactly one chunk carries usage, as
OpenAI sends it), then ``data: [DONE]``.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from app.core.errors import ContextGateError, error_body
from app.turns.prepared import Prepared
from app.turns.service import TurnResult

__all__ = ["ChatStreamRenderer", "completion_body"]

DONE = b"data: [DONE]\n\n"
_EMPTY_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def completion_body(result: TurnResult) -> dict[str, Any]:
    body = dict(result.completion or {})
    body.update(result.extensions())
    return body


class ChatStreamRenderer:
    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.model = prepared.request.model
        self.chunk_id = f"chatcmpl-{prepared.request_id}"
        self.created = int(time.time())
        self.fingerprint: str | None = None
        self.role_sent: set[int] = set()
        self.usage: dict[str, Any] | None = None

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk: dict[str, Any] = {
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

    def chunk(self, chunk: dict[str, Any]) -> list[bytes]:
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("system_fingerprint"):
            self.fingerprint = chunk["system_fingerprint"]
        out = []
        for choice in chunk["choices"]:
            index, delta = choice["index"], dict(choice["delta"])
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
        last.update(result.extensions())
        return [sse(last), DONE]

    def fail(self, error: ContextGateError) -> list[bytes]:
        return [sse(error_body(error.message, error.error_type, error.code, error.param))]
