"""POST /v1/chat/completions with ``stream: true``: OpenAI's SSE, then our metadata chunk.

The stream is: a role chunk, content / tool-call deltas, the finish reason, the usage chunk
(when ``stream_options.include_usage``), the metadata chunk (``choices: []`` with
``conversation_id``, ``cost``, ``context_utilization``), ``data: [DONE]``. The turn is
committed before the metadata chunk leaves. A failure mid-stream ends with an OpenAI error
frame and stores the partial answer marked incomplete; so does a client that goes away.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.chat.models import ChatContext
from app.chat.pipeline import Prepared, answer_message, costs, prepare, record
from app.chat.service import record_failure, response_extensions
from app.core.errors import ContextGateError, error_body
from app.core.state import AppState
from app.llm.client import StreamHandle
from app.llm.errors import map_upstream_error
from app.llm.responses import Usage, usage_of

__all__ = ["open_stream"]

logger = logging.getLogger(__name__)
DONE = b"data: [DONE]\n\n"


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


@dataclass(slots=True)
class StreamAccumulator:
    """What the answer turned out to be, rebuilt from the deltas."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None

    def add_delta(self, delta: dict[str, Any]) -> None:
        if delta.get("content"):
            self.content.append(delta["content"])
        if delta.get("reasoning_content"):
            self.reasoning.append(delta["reasoning_content"])
        for call in delta.get("tool_calls") or []:
            slot = self.tool_calls.setdefault(
                call.get("index", 0),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            if call.get("id"):
                slot["id"] = call["id"]
            function = call.get("function") or {}
            if function.get("name"):
                slot["function"]["name"] += function["name"]
            if function.get("arguments"):
                slot["function"]["arguments"] += function["arguments"]

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        return message


class _Stream:
    def __init__(self, state: AppState, prepared: Prepared, handle: StreamHandle) -> None:
        self.state = state
        self.prepared = prepared
        self.handle = handle
        self.acc = StreamAccumulator()
        self.model = prepared.request.model
        self.chunk_id = f"chatcmpl-{prepared.request_id}"
        self.created = int(time.time())
        self.fingerprint: str | None = None
        self.role_sent: set[int] = set()
        self.finished = False

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

    def translate(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        if chunk.get("usage"):
            self.acc.usage = chunk["usage"]
        if chunk.get("system_fingerprint"):
            self.fingerprint = chunk["system_fingerprint"]
        out = []
        for choice in chunk["choices"]:
            index, delta = choice["index"], dict(choice["delta"])
            delta.pop("role", None)
            if index not in self.role_sent:
                self.role_sent.add(index)
                delta = {"role": "assistant", **delta}
                if "content" not in delta and "tool_calls" not in delta:
                    delta["content"] = ""
            elif not delta and not choice.get("finish_reason"):
                continue
            if index == 0:
                self.acc.add_delta(delta)
                if choice.get("finish_reason"):
                    self.acc.finish_reason = choice["finish_reason"]
            out.append(
                {
                    "index": index,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": choice.get("finish_reason"),
                }
            )
        return self._envelope(out) if out else None

    def usage(self) -> Usage | None:
        return usage_of(self.acc.usage)

    async def save(self, *, complete: bool, error: ContextGateError | None = None) -> Any:
        answer = answer_message(self.state, self.model, self.acc.message(), complete=complete)
        usage = self.usage()
        prompt_cost, completion_cost = self.state.llm.cost(self.handle.deployment, usage)
        cost = costs(self.prepared, prompt_cost, completion_cost)
        await record(
            self.state,
            self.prepared,
            answer=answer,
            usage=usage,
            cost=cost,
            status="ok" if complete else "incomplete",
            status_code=200 if error is None else error.status_code,
            error=error.message[:2000] if error else None,
        )
        return cost

    async def events(self) -> AsyncIterator[bytes]:
        received_all = False
        try:
            async for chunk in self.handle.chunks():
                translated = self.translate(chunk)
                if translated is not None:
                    yield sse(translated)
            received_all = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the upstream failed mid-stream
            error = map_upstream_error(exc, self.model)
            self.finished = True
            await self._save_quietly(complete=False, error=error)
            yield sse(error_body(error.message, error.error_type, error.code, error.param))
            return
        finally:
            if not received_all and not self.finished:
                self._abandon()
        self.finished = True
        # Shielded: a client leaving now must not cut the commit of a finished answer short.
        try:
            cost = await asyncio.shield(self.save(complete=True))
        except Exception:  # not stored: say so in the stream instead of cutting it
            logger.exception("could not store a streamed answer")
            yield sse(
                error_body(
                    "The answer could not be stored; it was not saved to the conversation.",
                    "server_error",
                    "storage_error",
                )
            )
            return
        extensions = response_extensions(self.prepared, cost)
        metadata = self._envelope([])
        if self.prepared.request.include_usage:
            usage = self.acc.usage or {
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "total_tokens": 0,
            }
            yield sse({**self._envelope([]), "usage": usage})
            metadata["usage"] = usage
        yield sse({**metadata, **extensions})
        yield DONE

    async def _save_quietly(self, *, complete: bool, error: ContextGateError | None) -> None:
        try:
            await self.save(complete=complete, error=error)
        except Exception:
            logger.exception("could not store a partial answer")

    def _abandon(self) -> None:
        """The client went away (or the stream was cut): stop upstream, keep what arrived."""
        if self.finished:
            return
        self.finished = True
        task = asyncio.create_task(self._close_and_save())
        self.state.background.add(task)
        task.add_done_callback(self.state.background.discard)

    async def _close_and_save(self) -> None:
        await self.handle.aclose()
        await self._save_quietly(complete=False, error=None)


async def open_stream(
    state: AppState, context: ChatContext
) -> tuple[Prepared, AsyncIterator[bytes]]:
    """Prepare and open the upstream stream; errors before the first chunk raise as HTTP errors."""
    prepared = await prepare(state, context)
    request = prepared.request
    try:
        handle = await state.llm.stream(
            request.model, prepared.messages, request.forwarded_params()
        )
    except ContextGateError as error:
        await record_failure(state, prepared, error)
        raise
    return prepared, _Stream(state, prepared, handle).events()
