"""The stream lifecycle every door shares; a door's StreamRenderer only turns it into bytes.

Order of events: ``renderer.start()``; ``renderer.chunk()`` for each normalized upstream
chunk; then the turn is committed, and only then ``renderer.finish()`` (so a client that saw
the end of the stream can rely on the turn being stored). A failure mid-stream stores the
partial answer marked ``incomplete`` and ends with ``renderer.fail()``; a client that goes
away stops the upstream and the partial answer is stored in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from app.core.errors import ContextGateError
from app.llm.client import StreamHandle
from app.llm.errors import map_upstream_error
from app.llm.responses import usage_of
from app.state import AppState
from app.turns.accumulate import StreamAccumulator
from app.turns.context import TurnContext
from app.turns.memory_services import upstream_services
from app.turns.native import open_upstream_stream
from app.turns.pipeline import Outcome, answer_message, prepare, record
from app.turns.prepared import Prepared
from app.turns.service import TurnResult, record_failure, turn_cost
from app.wire.stream import ChatChunk

# What every door's event stream is answered with (no caching, no proxy buffering).
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

__all__ = ["SSE_HEADERS", "StreamRenderer", "TurnStream", "open_turn_stream"]

logger = logging.getLogger(__name__)


class StreamRenderer(Protocol):
    """A door's wire format for one streamed answer."""

    def start(self) -> list[bytes]: ...

    def chunk(self, chunk: ChatChunk) -> list[bytes]: ...

    def finish(self, result: TurnResult) -> list[bytes]: ...

    def fail(self, error: ContextGateError) -> list[bytes]: ...


class StorageFailed(ContextGateError):
    """The answer streamed completely but could not be committed."""

    def __init__(self) -> None:
        super().__init__(
            "The answer could not be stored; it was not saved to the conversation.",
            code="storage_error",
        )


class TurnStream:
    """An async iterable of the door's bytes; ``completed`` once the last event is out."""

    def __init__(
        self, state: AppState, prepared: Prepared, handle: StreamHandle, renderer: StreamRenderer
    ) -> None:
        self.state = state
        self.prepared = prepared
        self.handle = handle
        self.renderer = renderer
        self.acc = StreamAccumulator()
        self.completed = False
        self._finished = False  # the upstream part is over (saved, or being saved)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._events()

    async def _events(self) -> AsyncIterator[bytes]:
        for data in self.renderer.start():
            yield data
        received_all = False
        try:
            async for chunk in self.handle.chunks():
                self.acc.add_chunk(chunk)
                for data in self.renderer.chunk(chunk):
                    yield data
            received_all = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the upstream failed mid-stream
            error = map_upstream_error(exc, self.prepared.request.model)
            self._finished = True
            await self._save_quietly(complete=False, error=error)
            for data in self.renderer.fail(error):
                yield data
            return
        finally:
            if not received_all and not self._finished:
                self._abandon()
        self._finished = True
        # Shielded: a client leaving now must not cut the commit of a finished answer short.
        try:
            result = await asyncio.shield(self._save(complete=True, error=None))
        except Exception:  # not stored: say so in the stream instead of cutting it
            logger.exception("could not store a streamed answer")
            for data in self.renderer.fail(StorageFailed()):
                yield data
            return
        for data in self.renderer.finish(result):
            yield data
        self.completed = True

    async def _save(self, *, complete: bool, error: ContextGateError | None) -> TurnResult:
        model = self.prepared.request.model
        message = self.acc.message()
        answer = answer_message(self.state, model, message, complete=complete)
        usage = usage_of(self.acc.usage)
        priced = self.state.llm.price(self.handle.deployment, usage)
        cost = turn_cost(
            self.prepared,
            priced.prompt_cost,
            priced.completion_cost,
            cache_read=priced.cache_read_cost,
            cache_write=priced.cache_write_cost,
        )
        await record(
            self.state,
            self.prepared,
            answer=answer,
            usage=usage,
            cost=cost,
            outcome=Outcome(
                "ok" if complete else "incomplete",
                200 if error is None else error.status_code,
                error.message[:2000] if error else None,
            ),
        )
        return TurnResult(self.prepared, message, self.acc.finish_reason, usage, cost)

    async def _save_quietly(self, *, complete: bool, error: ContextGateError | None) -> None:
        try:
            await self._save(complete=complete, error=error)
        except Exception:
            logger.exception("could not store a partial answer")

    def _abandon(self) -> None:
        """The client went away (or the stream was cut): stop upstream, keep what arrived."""
        self._finished = True
        task = asyncio.create_task(self._close_and_save())
        self.state.background.add(task)
        task.add_done_callback(self.state.background.discard)

    async def _close_and_save(self) -> None:
        await self.handle.aclose()
        await self._save_quietly(complete=False, error=None)


async def open_turn_stream(
    state: AppState,
    context: TurnContext,
    renderer: Callable[[Prepared], StreamRenderer],
) -> TurnStream:
    """Prepare and open the upstream stream; errors before its first chunk raise (the door
    answers them as HTTP errors in its own envelope)."""
    prepared = await prepare(state, context)
    try:
        # OpenAI's Responses API for the Responses door on OpenAI models, else the chat form.
        handle = await open_upstream_stream(upstream_services(state), context, prepared)
    except ContextGateError as error:
        await record_failure(state, prepared, error)
        raise
    return TurnStream(state, prepared, handle, renderer(prepared))
