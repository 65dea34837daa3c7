"""The upstream pool (app/llm/http1.py) against real loopback servers: httpx's limits (max
connections, idle connections, keep-alive expiry, pool timeout), idle connections the server
closed, TLS, and bodies past the flow-control marks both ways."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest

from app.llm.http1 import HTTP1Transport
from tests.support.loopback import echo, read_request, response, serve, tls_contexts


def client(transport: HTTP1Transport | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=transport or HTTP1Transport(), trust_env=False)


async def slow_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        body = await read_request(reader)
        await asyncio.sleep(0.02)
        writer.write(response(body))
        await writer.drain()


async def test_a_server_closing_idle_connections_costs_no_request() -> None:
    """After the server closed the kept-alive connection, the pool sees it and opens a new
    one instead of failing the request."""

    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()  # then the handler returns: the server closes the connection

    transport = HTTP1Transport()
    async with serve(once) as (port, accepted), client(transport) as http:
        assert (await http.post(f"http://127.0.0.1:{port}/", content=b"a")).content == b"a"
        await asyncio.sleep(0.05)  # the FIN arrives while the connection is idle
        assert transport._idle_count == 0
        assert transport._open == 0
        assert (await http.post(f"http://127.0.0.1:{port}/", content=b"b")).content == b"b"
    assert len(accepted) == 2


async def test_requests_past_max_connections_queue_and_all_complete() -> None:
    """Twelve concurrent requests on at most three connections: every one answered with its
    own body, never a fourth connection."""
    limits = httpx.Limits(max_connections=3, max_keepalive_connections=3)
    async with serve(slow_echo) as (port, accepted), client(HTTP1Transport(limits=limits)) as http:

        async def one(index: int) -> bytes:
            answer = await http.post(f"http://127.0.0.1:{port}/", content=b"n%d" % index)
            return answer.content

        answers = await asyncio.gather(*(one(index) for index in range(12)))
        assert answers == [b"n%d" % index for index in range(12)]
    assert len(accepted) == 3


async def test_a_full_pool_times_out_a_waiting_request() -> None:
    limits = httpx.Limits(max_connections=1)
    async with serve(echo) as (port, _), client(HTTP1Transport(limits=limits)) as http:
        url = f"http://127.0.0.1:{port}/"
        async with http.stream("POST", url, content=b"held"):  # its body not read yet
            with pytest.raises(httpx.PoolTimeout):
                await http.post(url, content=b"x", timeout=httpx.Timeout(5, pool=0.1))
        assert (await http.post(url, content=b"free")).content == b"free"


async def test_a_full_pool_makes_room_by_closing_another_origins_idle_connection() -> None:
    limits = httpx.Limits(max_connections=1)
    transport = HTTP1Transport(limits=limits)
    async with (
        serve(echo) as (first, _),
        serve(echo) as (second, accepted),
        client(transport) as http,
    ):
        assert (await http.post(f"http://127.0.0.1:{first}/", content=b"a")).content == b"a"
        assert (await http.post(f"http://127.0.0.1:{second}/", content=b"b")).content == b"b"
        assert transport._open == 1
    assert len(accepted) == 1


async def test_idle_connections_past_the_keepalive_limit_are_closed() -> None:
    transport = HTTP1Transport(limits=httpx.Limits(max_connections=4, max_keepalive_connections=1))
    async with serve(slow_echo) as (port, accepted), client(transport) as http:
        url = f"http://127.0.0.1:{port}/"
        await asyncio.gather(*(http.post(url, content=b"x") for _ in range(4)))
        assert len(accepted) == 4
        assert (transport._open, transport._idle_count) == (1, 1)
        assert (await http.post(url, content=b"again")).content == b"again"
        assert len(accepted) == 4  # the kept connection served it


async def test_an_idle_connection_past_its_keepalive_expiry_is_not_reused() -> None:
    transport = HTTP1Transport(limits=httpx.Limits(keepalive_expiry=0.05))
    async with serve(echo) as (port, accepted), client(transport) as http:
        url = f"http://127.0.0.1:{port}/"
        await http.post(url, content=b"a")
        await http.post(url, content=b"b")
        assert len(accepted) == 1
        await asyncio.sleep(0.1)
        assert (await http.post(url, content=b"c")).content == b"c"
    assert len(accepted) == 2


async def test_closing_the_transport_closes_idle_connections() -> None:
    closed = asyncio.Event()

    async def notice_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()
        if await reader.read(1) == b"":
            closed.set()

    transport = HTTP1Transport()
    async with serve(notice_close) as (port, _):
        async with client(transport) as http:
            await http.post(f"http://127.0.0.1:{port}/", content=b"a")
        await asyncio.wait_for(closed.wait(), 5)


async def test_https_reuses_its_connection() -> None:
    server_context, client_context = tls_contexts("localhost")
    transport = HTTP1Transport(verify=client_context)
    async with serve(echo, server_context) as (port, accepted), client(transport) as http:
        for word in (b"one", b"two"):
            answer = await http.post(f"https://localhost:{port}/", content=word)
            assert answer.content == word
    assert len(accepted) == 1


async def test_a_certificate_for_another_host_is_a_connect_error() -> None:
    server_context, client_context = tls_contexts("example.org")
    transport = HTTP1Transport(verify=client_context)
    async with serve(echo, server_context) as (port, _), client(transport) as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(f"https://localhost:{port}/", content=b"x")


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_a_large_body_crosses_the_flow_control_marks_both_ways(tls: bool) -> None:
    payload = bytes(range(256)) * 12_000  # 3 MiB: past the 256 KiB read high-water mark

    async def late_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.1)  # the client's write hits back-pressure meanwhile
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()

    server_context, client_context = tls_contexts("localhost")
    transport = HTTP1Transport(verify=client_context)
    scheme, host = ("https", "localhost") if tls else ("http", "127.0.0.1")
    async with serve(late_echo, server_context if tls else None) as (port, _):
        request = httpx.Request("POST", f"{scheme}://{host}:{port}/", content=payload)
        answer = await transport.handle_async_request(request)
        await asyncio.sleep(0.1)  # let the server fill the client's buffer
        connection = answer.stream._connection  # type: ignore[attr-defined]
        assert 0 < connection.buffered < 1024 * 1024  # reading paused, not unbounded
        received = b"".join([chunk async for chunk in answer.aiter_raw()])
        await transport.aclose()
    assert received == payload


async def test_a_connection_closed_before_the_loop_saw_it_is_not_reused() -> None:
    """The server closed the idle connection and the FIN is in the socket, but the event loop
    has not run its callback yet: the pool asks the socket at checkout and opens a new one
    (else the request is written to a closed connection and lost)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    close_first = threading.Event()
    answered: list[bytes] = []

    def serve_two() -> None:
        for index in range(2):
            connection, _ = listener.accept()
            with connection:
                data = b""
                while not data.endswith(b"b") and not data.endswith(b"a"):
                    data += connection.recv(65536)
                answered.append(data[-1:])
                connection.sendall(response(data[-1:]))
                if index == 0:
                    close_first.wait(5)

    thread = threading.Thread(target=serve_two, daemon=True)
    thread.start()
    transport = HTTP1Transport()
    try:
        async with client(transport) as http:
            assert (await http.post(f"http://127.0.0.1:{port}/", content=b"a")).content == b"a"
            await asyncio.sleep(0)  # the answer's callbacks done: the connection is idle
            [idle] = transport._idle[next(iter(transport._idle))]
            idle.idle_since -= 1.0  # idle long enough to be asked
            close_first.set()
            time.sleep(0.1)  # blocking: the FIN arrives, the loop does not run meanwhile
            assert idle.reusable()  # as far as the loop's callbacks know
            assert (await http.post(f"http://127.0.0.1:{port}/", content=b"b")).content == b"b"
    finally:
        thread.join(5)
        listener.close()
    assert answered == [b"a", b"b"]
