"""Fault injection, disconnect observation and the raw ASGI responses that can misbehave."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

_FAULT = re.compile(r"FAULT:([^\r\n]*)")
HANG_SECONDS = 3600.0


class DropConnection(Exception):
    """Raised inside a response once it has started: uvicorn then closes the socket abruptly."""


class _HideDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while exc is not None:
            if isinstance(exc, DropConnection):
                return False
            exc = exc.__cause__ or exc.__context__
        return True


def quiet_drop_logs() -> None:
    """Keep uvicorn from logging a traceback for every deliberate connection drop."""
    logging.getLogger("uvicorn.error").addFilter(_HideDrops())


def directive_fault(text: str) -> dict[str, Any] | None:
    """`FAULT:<json>` anywhere in the text (JSON until end of line); ignored when not valid."""
    match = _FAULT.search(text)
    if not match:
        return None
    try:
        fault = orjson.loads(match.group(1).strip())
    except orjson.JSONDecodeError:
        return None
    return fault if isinstance(fault, dict) else None


class Watcher:
    """Notices the client going away (`http.disconnect`) while we sleep or stream."""

    def __init__(self, receive: Receive) -> None:
        self.gone = asyncio.Event()
        self._task = asyncio.create_task(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.gone.set()
                return

    async def sleep(self, seconds: float) -> bool:
        """Sleep; True as soon as the client disconnects instead."""
        if seconds <= 0:
            return self.gone.is_set()
        try:
            await asyncio.wait_for(self.gone.wait(), seconds)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self._task.cancel()


class Hooks:
    """Counters the responses update, owned by the app state."""

    def __init__(self) -> None:
        self.disconnects = 0
        self.active_streams = 0


async def _start(send: Send, status: int, ctype: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", ctype), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})


class FakeResponse:
    """A JSON answer or an SSE stream, after an optional delay, possibly dropped half-way.

    `delay` happens before any byte (JSON) or between the headers and the first chunk (SSE).
    `drop_after` closes the socket after that many SSE events (JSON: after half the body).
    """

    def __init__(
        self,
        hooks: Hooks,
        *,
        body: bytes | None = None,
        events: list[bytes] | None = None,
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        drop_after: int | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.hooks, self.body, self.events, self.status = hooks, body, events, status
        self.headers = [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]
        self.delay, self.chunk_delay, self.drop_after = delay, chunk_delay, drop_after
        self.content_type = content_type.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.events is not None:
            await self._stream(receive, send)
        else:
            await self._json(receive, send)

    async def _json(self, receive: Receive, send: Send) -> None:
        body = self.body or b""
        if self.delay > 0:
            watcher = Watcher(receive)
            try:
                if await watcher.sleep(self.delay):
                    self.hooks.disconnects += 1
                    return
            finally:
                watcher.close()
        length = [(b"content-length", str(len(body)).encode())]
        await _start(send, self.status, self.content_type, length + self.headers)
        if self.drop_after is not None:
            await send(
                {"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True}
            )
            raise DropConnection
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _stream(self, receive: Receive, send: Send) -> None:
        events = self.events or []
        hooks = self.hooks
        hooks.active_streams += 1
        watcher = Watcher(receive)
        try:
            extra = [(b"cache-control", b"no-cache"), *self.headers]
            await _start(send, 200, b"text/event-stream; charset=utf-8", extra)
            if await watcher.sleep(self.delay):
                hooks.disconnects += 1
                return
            last = len(events) - 1
            for i, event in enumerate(events):
                if i == last:
                    if self.drop_after is not None:
                        raise DropConnection
                    await send({"type": "http.response.body", "body": event, "more_body": False})
                    return
                await send({"type": "http.response.body", "body": event, "more_body": True})
                if self.drop_after is not None and i + 1 >= self.drop_after:
                    raise DropConnection
                # Yield (or pace) between events so that a client going away is noticed.
                if self.chunk_delay > 0:
                    if await watcher.sleep(self.chunk_delay):
                        hooks.disconnects += 1
                        return
                else:
                    await asyncio.sleep(0)
                    if watcher.gone.is_set():
                        hooks.disconnects += 1
                        return
        finally:
            watcher.close()
            hooks.active_streams -= 1
