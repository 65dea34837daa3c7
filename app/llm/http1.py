"""An httpx transport that speaks HTTP/1.1 itself: a keep-alive pool of
:class:`~app.llm.http1_connection.Connection` (asyncio Protocol + httptools).

It replaces ``httpx.AsyncHTTPTransport`` (httpcore, h11) under the upstream calls
(app/llm/openai_compat.py): with the same requests and responses, a call costs ~0.2 ms less
CPU alone, ~0.4 ms less in a busy server (bench/README.md, item 32). Kept from httpx's transport:
a pool per origin with ``httpx.Limits`` (max connections, idle connections, keep-alive
expiry), httpx's timeouts from the request (connect, read, write, pool), TLS with httpx's
default context (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), and httpx's exception types.
Not here: proxies (the caller routes those through an ``httpx.AsyncClient``), HTTP/2,
``Expect: 100-continue``, upgrades.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

import httpx

from app.llm.http1_connection import Connection, ResponseStream

__all__ = ["HEAD", "HTTP1Transport", "read_response", "request_head"]

_DEFAULT_PORTS = {b"http": 80, b"https": 443}
# A connection idle this long is asked whether the server closed it before it is reused (a
# readable socket: one poll; under load connections are reused within milliseconds).
CHECK_AFTER_IDLE_S = 0.5
# A request's extension: its head as ``request_head`` made it (the request line and headers,
# Content-Length last), sent as it is with the request's ``content``.
HEAD = "contextgate.head"


class HTTP1Transport(httpx.AsyncBaseTransport):
    """A pool of HTTP/1.1 connections, one request at a time on each."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        limits: httpx.Limits = httpx.Limits(max_connections=100, max_keepalive_connections=20),
    ) -> None:
        self._verify = verify
        self._ssl_context: ssl.SSLContext | None = None
        self._max_connections = limits.max_connections
        self._max_idle = limits.max_keepalive_connections
        self._expiry = limits.keepalive_expiry
        self._idle: dict[tuple[bytes, bytes, int], list[Connection]] = {}
        self._idle_count = 0
        self._open = 0  # connections open or being opened, idle ones included
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout") or {}
        url = request.url
        scheme = url.raw_scheme
        if scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url}'.")
        key = (scheme, url.raw_host, url.port or _DEFAULT_PORTS[scheme])
        content = getattr(request, "_content", None)  # read already (``content=``)
        head = request.extensions.get(HEAD)
        if head is None or content is None:
            head, chunked, length = _head(request)
            if content is not None and length is not None and length != len(content):
                raise httpx.LocalProtocolError("Content-Length does not match the body")
        else:
            chunked = False
        connection = await self._acquire(key, timeouts.get("pool"), timeouts.get("connect"))
        try:
            head_request = request.method == "HEAD"
            if content is None or chunked:
                connection.send(head, head_request=head_request)
                await self._write_stream(connection, request, chunked, timeouts.get("write"))
            else:  # the usual case: head and body in one write
                connection.send(head + content, head_request=head_request)
                await connection.drain(timeouts.get("write"))
            read_timeout = timeouts.get("read")
            await connection.read_head(read_timeout)
        except BaseException:
            self._discard(connection)
            raise
        extensions = {"http_version": connection.http_version, "reason_phrase": connection.reason}
        return httpx.Response(
            connection.status,
            headers=connection.headers,
            stream=ResponseStream(connection, read_timeout, self._release),
            extensions=extensions,
        )

    async def _write_stream(
        self, connection: Connection, request: httpx.Request, chunked: bool, timeout: float | None
    ) -> None:
        """A body not read yet (an async iterator), or one to send chunked."""
        stream = request.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        async for part in stream:
            if part:
                connection.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
                await connection.drain(timeout)
        if chunked:
            connection.write(b"0\r\n\r\n")
        await connection.drain(timeout)

    # --- the pool
    async def _acquire(
        self, key: tuple[bytes, bytes, int], pool_timeout: float | None, connect: float | None
    ) -> Connection:
        if self._closed:
            raise RuntimeError("the transport is closed")
        loop = asyncio.get_running_loop()
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            self._idle_count -= 1
            connection.on_lost = None
            idle_for = loop.time() - connection.idle_since
            if (
                connection.reusable()
                and (self._expiry is None or idle_for < self._expiry)
                and (idle_for < CHECK_AFTER_IDLE_S or not connection.peer_closed())
            ):
                return connection
            self._drop(connection)
        while self._max_connections is not None and self._open >= self._max_connections:
            if self._idle_count:
                self._drop(self._oldest_idle())  # its place, for this origin
                break
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(pool_timeout):
                    await waiter
            except BaseException as exc:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, but leaving: the turn goes to the next one
                if isinstance(exc, TimeoutError):
                    raise httpx.PoolTimeout(f"no connection free after {pool_timeout} s") from None
                raise
            return await self._acquire(key, pool_timeout, connect)
        self._open += 1
        try:
            return await self._connect(loop, key, connect)
        except BaseException:
            self._open -= 1
            self._wake_one()
            raise

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, key: tuple[bytes, bytes, int], timeout: float | None
    ) -> Connection:
        scheme, raw_host, port = key
        host = raw_host.decode("ascii")
        tls = self._tls_context() if scheme == b"https" else None
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: Connection(loop, key),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connect timed out after {timeout} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(str(exc)) from exc
        return connection

    def _tls_context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            verify = self._verify
            context = verify if isinstance(verify, ssl.SSLContext) else None
            context = context or httpx.create_ssl_context(verify=verify)
            context.set_alpn_protocols(["http/1.1"])
            self._ssl_context = context
        return self._ssl_context

    def _release(self, connection: Connection) -> None:
        """The response's stream is done with ``connection``: keep it idle or close it."""
        if (
            not self._closed
            and connection.reusable()
            and (self._max_idle is None or self._idle_count < self._max_idle)
        ):
            connection.busy = False
            connection.idle_since = connection.loop.time()
            connection.on_lost = self._lost_while_idle
            self._idle.setdefault(connection.key, []).append(connection)
            self._idle_count += 1
            self._wake_one()
        else:
            self._drop(connection)

    def _discard(self, connection: Connection) -> None:
        """A request failed (or was cancelled) before its response: the connection goes."""
        self._drop(connection)

    def _lost_while_idle(self, connection: Connection) -> None:
        idle = self._idle.get(connection.key)
        if idle and connection in idle:
            idle.remove(connection)
            self._idle_count -= 1
            self._drop(connection)

    def _drop(self, connection: Connection) -> None:
        connection.on_lost = None
        connection.close()
        self._open -= 1
        self._wake_one()

    def _oldest_idle(self) -> Connection:
        oldest = min((idle[0] for idle in self._idle.values() if idle), key=lambda c: c.idle_since)
        self._idle[oldest.key].remove(oldest)
        self._idle_count -= 1
        return oldest

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.on_lost = None
                connection.close()
        self._idle.clear()
        self._idle_count = 0


def request_head(method: str, url: httpx.URL, headers: httpx.Headers) -> bytes:
    """What ``_head`` writes for a request with ``headers`` (no framing header among them)
    then a Content-Length, up to that header's line: built once per upstream target, and
    raising as ``_head`` would (app/llm/openai_compat.py appends the rest per call)."""
    probe = httpx.Request(method, url, headers=headers, stream=httpx.ByteStream(b""))
    head, chunked, length = _head(probe)
    if chunked or length is not None:
        raise ValueError("the framing headers are the caller's")
    return head[:-2]  # without the blank line


def _head(request: httpx.Request) -> tuple[bytes, bool, int | None]:
    """The request line and headers, as h11 would send them (no CR, LF or NUL inside), and
    the body's framing: chunked, or its Content-Length (None if not given)."""
    raw = request.headers.raw
    lines = b"".join([name + b": " + value + b"\r\n" for name, value in raw])
    if lines.count(b"\n") != len(raw) or lines.count(b"\r") != len(raw) or b"\0" in lines:
        raise httpx.LocalProtocolError("Illegal header name or value")
    target = request.url.raw_path
    if b" " in target or b"\n" in target or b"\r" in target:
        raise httpx.LocalProtocolError("Illegal request target")
    head = b"%s %s HTTP/1.1\r\n%s\r\n" % (request.method.encode("ascii"), target, lines)
    lowered = head.lower()
    chunked = b"\ntransfer-encoding:" in lowered
    length = None
    at = lowered.find(b"\ncontent-length:")
    if at >= 0 and not chunked:
        value = lowered[at + 16 : lowered.index(b"\r", at)].strip()
        if not value.isdigit():
            raise httpx.LocalProtocolError("Illegal Content-Length")
        length = int(value)
    return head, chunked, length


async def read_response(response: httpx.Response) -> bytes:
    """``await response.aread()`` then ``aclose()``: the body, decoded as httpx decodes it.

    A response of this pool is read straight from its connection: httpx's way (the stream's
    generator, then ``aiter_raw``, ``aiter_bytes``, a chunker and a decoder per response, two
    ``request_context`` managers) cost more than the parse. Errors and their ``request``,
    Content-Encoding, the read timeout and the connection's release are httpx's.
    """
    stream = response.stream
    if type(stream) is not ResponseStream or response.is_stream_consumed or response.is_closed:
        try:
            return await response.aread()
        finally:
            await response.aclose()
    response.is_stream_consumed = True
    try:
        content = await stream.read_all()
        response._num_bytes_downloaded = len(content)
        if stream.encoded:
            decoder = response._get_content_decoder()
            content = decoder.decode(content) + decoder.flush()
    except httpx.RequestError as exc:  # as httpx's request_context
        request = response._request
        if request is not None:
            exc.request = request
        raise
    finally:
        response.is_closed = True  # the stream is finished (its connection released or closed)
    response._content = content
    return content
