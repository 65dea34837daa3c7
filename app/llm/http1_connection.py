"""One HTTP/1.1 client connection on an asyncio Protocol, parsed by httptools (llhttp in C).

What app/llm/http1.py's pool hands a request to. httpx's own transport reaches the socket
through httpcore and h11 (pure Python): building httpcore's request from httpx's, h11's event
objects and state machine, a lock and a pool pass per request, then httpx's response wrapper
around httpcore's. Here a request is one ``transport.write`` of its head and body, and the
response is parsed where its bytes arrive (``data_received``): the caller awaits the head,
then the body's chunks as they come. One request at a time per connection; the pool decides
when a connection is reused (complete response, keep-alive, nothing more sent).
"""

from __future__ import annotations

import asyncio
import select
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import cast

import httptools
import httpx

__all__ = ["Connection", "ResponseStream"]

_HIGH_WATER = 256 * 1024  # stop reading from the socket past this many buffered body bytes
_LOW_WATER = 64 * 1024  # and read again below this
_VERSIONS = {"1.1": b"HTTP/1.1", "1.0": b"HTTP/1.0"}


class Connection(asyncio.Protocol):
    """A connection and the response being read on it (``httptools`` calls the ``on_*``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, key: tuple[bytes, bytes, int]) -> None:
        self.loop = loop
        self.key = key  # (scheme, host, port): the pool's origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.lost = False  # the peer closed or the connection broke
        self.error: BaseException | None = None
        self.idle_since = 0.0
        self.on_lost: Callable[[Connection], None] | None = None  # the pool's, while idle
        self._waiter: asyncio.Future[object] | None = None
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[object] | None = None
        self._reading_paused = False
        self._begin_response()

    def _begin_response(self) -> None:
        self.busy = False  # a request is out and its response not yet complete
        self.head_done = False
        self.complete = False
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.framed = False  # content-length or chunked: the end is not the connection's
        self.encoded = False  # a Content-Encoding header came (httpx's decoders read it)
        self.keep_alive = False
        self.http_version = b"HTTP/1.1"
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.head_request = False
        self.stray = False  # bytes came that belong to no response

    # --- asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        if not self.busy or self.complete:
            self.stray = True  # nothing asked: the connection cannot be trusted any more
            self._abort()
            return
        try:
            self.parser.feed_data(data)
        except Exception as exc:  # httptools' errors, or one raised by an on_* below
            self.error = httpx.RemoteProtocolError(f"malformed response from the upstream: {exc}")
            self._abort()
        self._wake()

    def eof_received(self) -> bool | None:
        self._ended(None)
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def _ended(self, exc: Exception | None) -> None:
        if self.lost:
            return
        self.lost = True
        if self.busy and not self.complete and self.error is None:
            if self.head_done and not self.framed:
                self.complete = True  # the body ends with the connection (no length given)
            elif exc is not None:
                self.error = httpx.ReadError(str(exc) or exc.__class__.__name__)
            elif self.head_done:
                self.error = httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            else:
                self.error = httpx.RemoteProtocolError(
                    "Server disconnected without sending a response."
                )
        self._wake()
        if self.on_lost is not None:
            self.on_lost(self)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    # --- httptools
    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one request: stop here, trust nothing more
            raise httptools.HttpParserError("more data after the response")

    def on_status(self, status: bytes) -> None:
        self.reason += status  # may come in pieces

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        lowered = name.lower()
        if lowered == b"content-encoding":
            self.encoded = True
        elif lowered == b"content-length" or (
            lowered == b"transfer-encoding" and b"chunked" in value.lower()
        ):
            self.framed = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.reason, self.headers, self.framed = b"", [], False  # informational: skip
            return
        self.status = status
        self.head_done = True
        self.keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once complete
        self.http_version = _VERSIONS.get(self.parser.get_http_version(), b"HTTP/1.1")
        if status in (204, 304):
            self.framed = True  # no body, by definition
        if self.head_request:
            # llhttp would wait for a body the Content-Length announces: the answer ends
            # here, and so does the connection (the pool does not reuse it).
            self.complete = True
            self.stray = True

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self._reading_paused and self.transport:
            self.transport.pause_reading()
            self._reading_paused = True

    def on_message_complete(self) -> None:
        if self.head_done:
            self.complete = True

    # --- what the transport and the stream call
    def send(self, data: bytes, *, head_request: bool) -> None:
        """Write a request (head and body); its response starts now."""
        self._begin_response()
        self.busy = True
        self.head_request = head_request
        assert self.transport is not None
        self.transport.write(data)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def drain(self, timeout: float | None) -> None:
        """Wait while the transport holds more than its high-water mark of unsent bytes."""
        if self.error is not None:
            raise self.error
        if not self._writing_paused or self.lost:
            return
        self._drain_waiter = waiter = self.loop.create_future()
        if not await _wait(self.loop, waiter, timeout):
            self._abort()
            raise httpx.WriteTimeout(f"timed out after {timeout} s")

    async def read_head(self, timeout: float | None) -> None:
        while not self.head_done:
            if self.error is not None:
                raise self.error
            await self._wait_for_data(timeout)

    def take(self) -> bytes:
        data = self.chunks.popleft()
        self.buffered -= len(data)
        if self._reading_paused and self.buffered < _LOW_WATER and self.transport:
            self.transport.resume_reading()
            self._reading_paused = False
        return data

    async def _wait_for_data(self, timeout: float | None) -> None:
        self._waiter = waiter = self.loop.create_future()
        try:
            if not await _wait(self.loop, waiter, timeout):
                self._abort()
                raise httpx.ReadTimeout(f"timed out after {timeout} s")
        finally:
            self._waiter = None

    def reusable(self) -> bool:
        """Whether the pool may send another request on this connection."""
        return (
            self.complete
            and not self.lost
            and not self.stray
            and self.error is None
            and self.keep_alive
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def peer_closed(self) -> bool:
        """Whether the idle socket is readable: the server closed it (or sent something
        unasked) and the loop has not run that callback yet. httpcore asks the same at
        checkout; a request written there fails with "Server disconnected without sending
        a response"."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()

    def _abort(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.abort()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


async def _wait(
    loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[object], timeout: float | None
) -> bool:
    """Await ``waiter``; False if ``timeout`` seconds passed first."""
    if timeout is None:
        await waiter
        return True
    timer = loop.call_later(timeout, _expire, waiter)
    try:
        await waiter
    finally:
        timer.cancel()
    return waiter.result() is not _TIMED_OUT


_TIMED_OUT = object()


def _expire(waiter: asyncio.Future[object]) -> None:
    if not waiter.done():
        waiter.set_result(_TIMED_OUT)


class ResponseStream(httpx.AsyncByteStream):
    """The response body as it arrives; the connection goes back to the pool (``release``)
    once the body is complete, and is closed if the stream is closed before that."""

    def __init__(
        self,
        connection: Connection,
        read_timeout: float | None,
        release: Callable[[Connection], None],
    ) -> None:
        self._connection: Connection | None = connection
        self._timeout = read_timeout
        self._release = release
        self.encoded = connection.encoded

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while connection is not None:
            if connection.chunks:
                yield connection.take()
            elif connection.complete:
                self._finish()
                return
            elif connection.error is not None:
                self._finish()
                raise connection.error
            else:
                await connection._wait_for_data(self._timeout)

    async def read_all(self) -> bytes:
        """The whole raw body, as ``__aiter__`` would yield it (same waits, errors and
        release), without an async generator per response."""
        connection = self._connection
        if connection is None:
            return b""
        parts: list[bytes] = []
        try:
            while True:
                while connection.chunks:
                    parts.append(connection.take())  # resumes a paused read, as __aiter__
                if connection.complete:
                    break
                if connection.error is not None:
                    raise connection.error
                await connection._wait_for_data(self._timeout)
        finally:
            self._finish()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _finish(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._release(connection)

    async def aclose(self) -> None:
        self._finish()
