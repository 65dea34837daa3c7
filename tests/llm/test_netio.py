"""The upstream pool's asyncio network backend (app/llm/netio.py), against real loopback
servers: plain and TLS requests, keep-alive reuse, a server closing idle connections,
timeouts, refused connections and bodies past the flow-control marks."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpcore
import httpx
import pytest
import trustme

from app.llm.netio import (
    AsyncioBackend,
    AsyncioStream,
    AsyncioTransport,
    _Connection,
    _ConnectionPool,
    _Lock,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serve(
    handler: Handler, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[int, list[int]]]:
    """A loopback server; yields its port and a list that grows by one per accepted
    connection."""
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0, ssl=ssl_context)
    async with server:
        yield server.sockets[0].getsockname()[1], accepted


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return await reader.readexactly(length)


def response(body: bytes, *, close: bool = False) -> bytes:
    connection = b"close" if close else b"keep-alive"
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: " + connection
        + b"\r\n\r\n" + body
    )  # fmt: skip


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request on the connection with its own body."""
    while True:
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()


def client(**kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=AsyncioTransport(**kwargs), trust_env=False)  # type: ignore[arg-type]


async def test_the_transport_pools_on_the_asyncio_backend() -> None:
    transport = AsyncioTransport()
    assert isinstance(transport._pool._network_backend, AsyncioBackend)  # type: ignore[attr-defined]


async def test_requests_reuse_one_connection() -> None:
    async with serve(echo) as (port, accepted), client() as http:
        for index in range(5):
            answer = await http.post(f"http://127.0.0.1:{port}/x", content=b"ping %d" % index)
            assert answer.status_code == 200
            assert answer.content == b"ping %d" % index
    assert len(accepted) == 1


async def test_a_server_closing_idle_connections_costs_no_request() -> None:
    """After the server closed the kept-alive connection, the pool sees it (``is_readable``
    from the protocol's state) and opens a new one instead of failing the request."""

    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()  # then the handler returns: the server closes the connection

    async with serve(once) as (port, accepted), client() as http:
        assert (await http.post(f"http://127.0.0.1:{port}/", content=b"a")).content == b"a"
        await asyncio.sleep(0.05)  # the FIN arrives while the connection is idle
        assert (await http.post(f"http://127.0.0.1:{port}/", content=b"b")).content == b"b"
    assert len(accepted) == 2


async def test_is_readable_tells_an_idle_connection_from_a_closed_one() -> None:
    closed = asyncio.Event()

    async def close_on_signal(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await closed.wait()

    async with serve(close_on_signal) as (port, _):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert stream.get_extra_info("is_readable") is False
        assert stream.get_extra_info("server_addr")[1] == port
        assert stream.get_extra_info("client_addr")[0] == "127.0.0.1"
        closed.set()
        await asyncio.sleep(0.05)
        assert stream.get_extra_info("is_readable") is True
        assert await stream.read(100, timeout=1) == b""
        await stream.aclose()


async def test_a_large_body_crosses_the_flow_control_marks_both_ways() -> None:
    payload = bytes(range(256)) * 12_000  # 3 MiB: past the 256 KiB read high-water mark

    async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.1)  # the client's write hits back-pressure meanwhile
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()

    async with serve(slow_echo) as (port, _), client() as http:
        async with http.stream("POST", f"http://127.0.0.1:{port}/", content=payload) as answer:
            await asyncio.sleep(0.1)  # let the server fill the client's buffer
            received = b"".join([chunk async for chunk in answer.aiter_raw()])
    assert received == payload


async def test_a_silent_server_times_out_the_read() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)

    async with serve(silent) as (port, _), client() as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(f"http://127.0.0.1:{port}/", content=b"x", timeout=0.2)


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with serve(echo) as (port, _):
        pass  # closed: nothing listens on the port any more
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(f"http://127.0.0.1:{port}/", content=b"x")
    with pytest.raises(httpcore.ConnectError):
        await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=1)


async def test_a_read_after_a_reset_is_a_read_error() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.transport.abort()  # RST, not FIN

    async with serve(reset) as (port, _):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert isinstance(stream, AsyncioStream)
        await stream.write(b"x", timeout=1)
        try:
            data = await stream.read(100, timeout=2)
        except httpcore.ReadError:
            data = None
        assert data in (None, b"")  # a reset reads as an error or as EOF, never as bytes
        await asyncio.sleep(0.05)
        with pytest.raises(httpcore.WriteError):
            await stream.write(b"more", timeout=1)
        await stream.aclose()


def tls_contexts(certified_host: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for ``certified_host``, and a client context
    that trusts its authority."""
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(certified_host).configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    return server_context, client_context


async def test_https_through_start_tls() -> None:
    server_context, client_context = tls_contexts("localhost")
    https = client(verify=client_context)
    async with serve(echo, server_context) as (port, accepted), https as http:
        for word in (b"one", b"two"):
            answer = await http.post(f"https://localhost:{port}/", content=word)
            assert answer.content == word
    assert len(accepted) == 1


async def test_a_large_body_over_tls_crosses_the_flow_control_marks() -> None:
    server_context, client_context = tls_contexts("localhost")
    payload = bytes(range(256)) * 12_000  # 3 MiB each way

    async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.1)
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()

    https = client(verify=client_context)
    async with serve(slow_echo, server_context) as (port, _), https as http:
        url = f"https://localhost:{port}/"
        async with http.stream("POST", url, content=payload) as answer:
            await asyncio.sleep(0.1)  # let the server fill the client's buffer
            received = b"".join([chunk async for chunk in answer.aiter_raw()])
    assert received == payload


async def test_a_certificate_for_another_host_is_a_connect_error() -> None:
    server_context, client_context = tls_contexts("example.org")
    async with serve(echo, server_context) as (port, _), client(verify=client_context) as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(f"https://localhost:{port}/", content=b"x")


async def test_an_unread_response_is_buffered_up_to_the_high_water_mark() -> None:
    """A reader that falls behind pauses the socket instead of buffering without bound."""
    payload = b"x" * (4 * 1024 * 1024)

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(payload)
        await writer.drain()

    async with serve(flood) as (port, _):
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        assert isinstance(stream, AsyncioStream)
        await asyncio.sleep(0.3)
        assert 0 < len(stream._protocol.buffer) < 1024 * 1024
        received = 0
        while received < len(payload):
            received += len(await stream.read(65_536, timeout=2))
        assert received == len(payload)
        await stream.aclose()


# --- the pool (_ConnectionPool): same decisions as httpcore's, asyncio locks ---------------------


async def test_the_pool_and_its_connections_are_the_lean_ones() -> None:
    async with serve(echo) as (port, _):
        transport = AsyncioTransport()
        async with httpx.AsyncClient(transport=transport, trust_env=False) as http:
            await http.post(f"http://127.0.0.1:{port}/", content=b"a")
            await http.post(f"http://127.0.0.1:{port}/", content=b"b")  # the lock is swapped
            pool = transport._pool
            assert type(pool) is _ConnectionPool
            (connection,) = pool.connections
            assert type(connection) is _Connection
            assert type(connection._request_lock) is _Lock
            assert type(connection._connection._state_lock) is _Lock  # type: ignore[union-attr]


async def test_requests_past_max_connections_queue_and_all_complete() -> None:
    """Twelve concurrent requests on at most three connections, each a few at a time: every
    one answered with its own body, never a fourth connection."""

    async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await read_request(reader)
            await asyncio.sleep(0.01)
            writer.write(response(body))
            await writer.drain()

    limits = httpx.Limits(max_connections=3, max_keepalive_connections=3)
    async with serve(slow_echo) as (port, accepted), client(limits=limits) as http:

        async def one(index: int) -> bytes:
            answer = await http.post(f"http://127.0.0.1:{port}/", content=b"n%d" % index)
            return answer.content

        answers = await asyncio.gather(*(one(index) for index in range(12)))
        assert answers == [b"n%d" % index for index in range(12)]
    assert len(accepted) == 3


async def test_idle_connections_past_the_keepalive_limit_are_closed() -> None:
    """httpcore's rule, kept: once requests are done, connections beyond
    ``max_keepalive_connections`` are closed (the pool counts every connection)."""

    async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await read_request(reader)
            await asyncio.sleep(0.02)
            writer.write(response(body))
            await writer.drain()

    transport = AsyncioTransport(
        limits=httpx.Limits(max_connections=4, max_keepalive_connections=1)
    )
    async with (
        serve(slow_echo) as (port, accepted),
        httpx.AsyncClient(transport=transport, trust_env=False) as http,
    ):
        url = f"http://127.0.0.1:{port}/"
        await asyncio.gather(*(http.post(url, content=b"x") for _ in range(4)))
        assert len(accepted) == 4
        assert len(transport._pool.connections) == 1  # type: ignore[attr-defined]
        assert (await http.post(url, content=b"again")).content == b"again"
        assert len(accepted) == 4  # the kept connection served it
