"""An httpcore network backend on asyncio's own transports, for the upstream connection pool.

httpcore 1.0 reaches the network through anyio under asyncio. py-spy put anyio at ~6 % of the
server's CPU under load: every socket read and write opens a cancel scope with its own timer,
maps exceptions through a context manager and yields a checkpoint, and the pool asks every
idle connection whether it is readable with a ``poll()`` system call. This backend keeps what
httpcore needs and nothing more: a read returns buffered bytes at once or waits on one future
(with a timer only when a timeout is set); a write hands the bytes to the transport and waits
only under back-pressure; "is readable" is answered from the protocol's state. The same
design was proposed upstream (encode/httpcore#930, pydantic/httpx2#1170).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypedDict, Unpack

import httpcore
import httpx
from httpcore import (
    AsyncNetworkBackend,
    AsyncNetworkStream,
    ConnectError,
    ConnectTimeout,
    ReadError,
    ReadTimeout,
    WriteError,
    WriteTimeout,
)

__all__ = ["AsyncioBackend", "AsyncioTransport"]

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)

_HIGH_WATER = 256 * 1024  # stop reading from the socket past this many buffered bytes
_LOW_WATER = 64 * 1024  # and read again below this


class _StreamProtocol(asyncio.Protocol):
    """Buffers what arrives; one reader and one writer at a time (HTTP/1.1 per connection)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self._read_waiter: asyncio.Future[object] | None = None
        self._drain_waiter: asyncio.Future[object] | None = None
        self._writing_paused = False
        self._reading_paused = False

    # --- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and not self._reading_paused and self.transport:
            self.transport.pause_reading()
            self._reading_paused = True
        self._wake_reader()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake_reader()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None:
            self.error = exc
        self._wake_reader()
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def _wake_reader(self) -> None:
        if self._read_waiter is not None and not self._read_waiter.done():
            self._read_waiter.set_result(None)

    # --- what the stream calls
    def take(self, max_bytes: int) -> bytes:
        if len(self.buffer) <= max_bytes:
            data = bytes(self.buffer)
            self.buffer.clear()
        else:
            data = bytes(self.buffer[:max_bytes])
            del self.buffer[:max_bytes]
        if self._reading_paused and len(self.buffer) < _LOW_WATER and self.transport:
            self.transport.resume_reading()
            self._reading_paused = False
        return data

    async def wait_readable(self, timeout: float | None) -> None:
        self._read_waiter = waiter = self._loop.create_future()
        await _wait(self._loop, waiter, timeout, ReadTimeout)

    async def drain(self, timeout: float | None) -> None:
        if not self._writing_paused or self.transport is None or self.transport.is_closing():
            return
        self._drain_waiter = waiter = self._loop.create_future()
        await _wait(self._loop, waiter, timeout, WriteTimeout)


async def _wait(
    loop: asyncio.AbstractEventLoop,
    waiter: asyncio.Future[object],
    timeout: float | None,
    error: type[Exception],
) -> None:
    if timeout is None:
        await waiter
        return
    timer = loop.call_later(timeout, _expire, waiter)
    try:
        await waiter
    finally:
        timer.cancel()
    if waiter.result() is _TIMED_OUT:
        raise error(f"timed out after {timeout} s")


_TIMED_OUT = object()  # what a waiter gets when its time is up


def _expire(waiter: asyncio.Future[object]) -> None:
    if not waiter.done():
        waiter.set_result(_TIMED_OUT)


class AsyncioStream(AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _StreamProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.buffer and not protocol.eof:
            await protocol.wait_readable(timeout)
        if protocol.buffer:
            return protocol.take(max_bytes)
        if protocol.error is not None:
            raise ReadError(str(protocol.error)) from protocol.error
        return b""  # the peer closed: httpcore turns this into its own error where it matters

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self._transport.is_closing():
            raise WriteError("the connection is closed")
        try:
            self._transport.write(buffer)
        except (OSError, RuntimeError) as exc:
            raise WriteError(str(exc)) from exc
        await self._protocol.drain(timeout)

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as exc:
            self._transport.close()
            raise ConnectTimeout(f"TLS handshake timed out after {timeout} s") from exc
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise ConnectError(str(exc)) from exc
        assert transport is not None  # start_tls returns None only for a closed transport
        # Flow control (pause_reading/resume_reading) now goes to the TLS transport, which
        # feeds the protocol; the raw one is the TLS layer's own business.
        self._protocol.transport = transport  # type: ignore[assignment]
        return AsyncioStream(transport, self._protocol)  # type: ignore[arg-type]

    def get_extra_info(self, info: str) -> object:
        if info == "is_readable":
            # Asked of idle connections: any byte, EOF or error means the server is done.
            protocol = self._protocol
            return bool(protocol.buffer) or protocol.eof or self._transport.is_closing()
        key = {"client_addr": "sockname", "server_addr": "peername"}.get(info, info)
        if key in ("ssl_object", "sockname", "peername", "socket"):
            return self._transport.get_extra_info(key)
        return None


class AsyncioBackend(AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        return await self._connect(
            lambda factory: loop.create_connection(factory, host, port, local_addr=local),
            timeout,
            socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        return await self._connect(
            lambda factory: loop.create_unix_connection(factory, path), timeout, socket_options
        )

    async def _connect(
        self,
        open_connection: Callable[
            [Callable[[], _StreamProtocol]], Awaitable[tuple[asyncio.Transport, _StreamProtocol]]
        ],
        timeout: float | None,
        options: Iterable[SocketOption] | None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await open_connection(lambda: _StreamProtocol(loop))
        except TimeoutError as exc:
            raise ConnectTimeout(f"connect timed out after {timeout} s") from exc
        except OSError as exc:
            raise ConnectError(str(exc)) from exc
        sock = transport.get_extra_info("socket")
        for option in options or ():
            sock.setsockopt(*option)
        return AsyncioStream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class TransportOptions(TypedDict, total=False):
    """The options of ``httpx.AsyncHTTPTransport`` this transport is built with."""

    verify: ssl.SSLContext | str | bool
    limits: httpx.Limits
    proxy: httpx.URL | str | httpx.Proxy | None
    retries: int


class _Lock:
    """httpcore's ``AsyncLock`` on asyncio's lock. anyio's, which httpcore uses, opens a
    cancel scope and yields to the event loop on every acquire, three times per request."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> _Lock:
        await self._lock.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


class _Connection(httpcore.AsyncHTTPConnection):
    """httpcore's connection with :class:`_Lock` for its locks. The HTTP/1.1 connection it
    opens on its first request is made inside httpcore's code, with httpcore's lock; that one
    is swapped on the next request, when the connection is idle and its lock not held."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_lock = _Lock()  # type: ignore[assignment]

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        connection = self._connection
        if type(connection) is httpcore.AsyncHTTP11Connection:
            lock: object = connection._state_lock
            if not isinstance(lock, _Lock):
                connection._state_lock = _Lock()  # type: ignore[assignment]
        return await super().handle_async_request(request)


class _ConnectionPool(httpcore.AsyncConnectionPool):
    """httpcore's pool, minus work that grows with the number of pooled connections.

    ``_assign_requests_to_connections`` runs twice per request (when it arrives, when its
    response is closed). httpcore's rebuilds a list of every connection for each idle one (its
    keep-alive check, which counts every connection, idle or not) and lists every available
    and idle connection for each queued request: with 32 connections, ~2,000 calls per
    request. This one makes the same decisions in one pass per queued request. Closing no
    connection opens no cancel scope, and connections are :class:`_Connection`.
    """

    def create_connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        if self._proxy is not None:
            return super().create_connection(origin)
        return _Connection(
            origin=origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=self._keepalive_expiry,
            http1=self._http1,
            http2=self._http2,
            retries=self._retries,
            local_address=self._local_address,
            uds=self._uds,
            network_backend=self._network_backend,
            socket_options=self._socket_options,
        )

    def _assign_requests_to_connections(self) -> list[httpcore.AsyncConnectionInterface]:
        closing: list[httpcore.AsyncConnectionInterface] = []
        connections = self._connections
        for connection in list(connections):
            if connection.is_closed():
                connections.remove(connection)
            elif connection.has_expired():
                connections.remove(connection)
                closing.append(connection)
            elif connection.is_idle() and len(connections) > self._max_keepalive_connections:
                # httpcore's test, which counts every connection (idle or not)
                connections.remove(connection)
                closing.append(connection)

        for pool_request in self._requests:
            if not pool_request.is_queued():
                continue
            origin = pool_request.request.url.origin
            available = next(
                (c for c in connections if c.can_handle_request(origin) and c.is_available()),
                None,
            )
            if available is not None:
                pool_request.assign_to_connection(available)
            elif len(connections) < self._max_connections:
                connection = self.create_connection(origin)
                connections.append(connection)
                pool_request.assign_to_connection(connection)
            else:
                idle = next((c for c in connections if c.is_idle()), None)
                if idle is not None:
                    connections.remove(idle)
                    closing.append(idle)
                    connection = self.create_connection(origin)
                    connections.append(connection)
                    pool_request.assign_to_connection(connection)
        return closing

    async def _close_connections(self, closing: list[httpcore.AsyncConnectionInterface]) -> None:
        if closing:
            await super()._close_connections(closing)


class AsyncioTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with its connection pool (or proxy pool) on ``AsyncioBackend``."""

    def __init__(self, **kwargs: Unpack[TransportOptions]) -> None:
        super().__init__(**kwargs)
        pool = self._pool
        if type(pool) is httpcore.AsyncConnectionPool:
            # The same pool, with the methods above: httpx builds it from its options.
            pool.__class__ = _ConnectionPool
        if isinstance(pool, httpcore.AsyncConnectionPool):  # also AsyncHTTPProxy
            pool._network_backend = AsyncioBackend()
