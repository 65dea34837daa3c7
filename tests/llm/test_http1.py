"""The upstream pool's HTTP/1.1 (app/llm/http1.py, http1_connection.py) against real loopback
servers: what goes out, how each kind of body comes back (Content-Length, chunked, to the
end of the connection, streamed as it arrives), and what a broken or silent server raises.
The pool itself (limits, idle connections, TLS, flow control): test_http1_pool.py."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator

import httpx
import pytest

from app.llm.http1 import HTTP1Transport
from tests.support.loopback import chunked, echo, read_request, response, serve


def client(transport: HTTP1Transport | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=transport or HTTP1Transport(), trust_env=False)


async def test_requests_reuse_one_connection() -> None:
    async with serve(echo) as (port, accepted), client() as http:
        for index in range(5):
            answer = await http.post(f"http://127.0.0.1:{port}/x", content=b"ping %d" % index)
            assert answer.status_code == 200
            assert answer.http_version == "HTTP/1.1"
            assert answer.reason_phrase == "OK"
            assert answer.content == b"ping %d" % index
    assert len(accepted) == 1


async def test_the_request_goes_out_as_httpx_built_it() -> None:
    seen: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head + await reader.readexactly(4))
        writer.write(response(b""))
        await writer.drain()

    async with serve(record) as (port, _), client() as http:
        await http.post(
            f"http://127.0.0.1:{port}/v1/a%20b?q=1", content=b"body", headers={"X-Key": "v"}
        )
    lines = seen[0].split(b"\r\n")
    assert lines[0] == b"POST /v1/a%20b?q=1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{port}".encode() in lines
    assert b"X-Key: v" in lines
    assert b"Content-Length: 4" in lines
    assert seen[0].endswith(b"\r\n\r\nbody")


async def test_a_streamed_request_body_goes_out_chunked() -> None:
    received: list[bytes] = []

    async def dechunk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        assert b"transfer-encoding: chunked" in head.lower()
        received.append(await reader.readuntil(b"0\r\n\r\n"))
        writer.write(response(b"ok"))
        await writer.drain()

    async def parts() -> AsyncIterator[bytes]:
        yield b"hello "
        yield b"world"

    async with serve(dechunk) as (port, _), client() as http:
        answer = await http.post(f"http://127.0.0.1:{port}/", content=parts())
    assert answer.content == b"ok"
    assert received == [chunked(b"hello ", b"world")]


async def test_a_header_with_a_line_break_is_refused_before_sending() -> None:
    async with serve(echo) as (port, accepted), client() as http:
        with pytest.raises(httpx.LocalProtocolError):
            await http.post(
                f"http://127.0.0.1:{port}/", content=b"x", headers={"X-A": "1\r\nX-B: 2"}
            )
    assert accepted == []


async def test_chunked_and_gzipped_bodies_are_decoded() -> None:
    packed = gzip.compress(b"hello world")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-encoding: gzip\r\n\r\n"
                + chunked(packed[:7], packed[7:])
            )
            await writer.drain()

    async with serve(answer) as (port, accepted), client() as http:
        for _ in range(2):
            assert (await http.post(f"http://127.0.0.1:{port}/", content=b"")).text == (
                "hello world"
            )
    assert len(accepted) == 1


async def test_a_body_without_length_ends_with_the_connection() -> None:
    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\npart one, ")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"part two")
        await writer.drain()  # then the handler returns and the server closes

    async with serve(until_close) as (port, accepted), client() as http:
        for _ in range(2):
            answer = await http.post(f"http://127.0.0.1:{port}/", content=b"x")
            assert answer.content == b"part one, part two"
    assert len(accepted) == 2  # never reused: its end was the connection's


async def test_an_http_1_0_answer_says_so_and_ends_its_connection() -> None:
    async def old_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    async with serve(old_server) as (port, accepted), client() as http:
        for _ in range(2):
            answer = await http.post(f"http://127.0.0.1:{port}/", content=b"x")
            assert (answer.http_version, answer.content) == ("HTTP/1.0", b"ok")
    assert len(accepted) == 2  # HTTP/1.0 without keep-alive: not reused


async def test_connection_close_and_no_content_answers() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await read_request(reader)
            if body == b"close":
                writer.write(response(b"bye", close=True))
            else:
                writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            await writer.drain()

    async with serve(answer) as (port, accepted), client() as http:
        url = f"http://127.0.0.1:{port}/"
        empty = await http.post(url, content=b"x")
        assert (empty.status_code, empty.content) == (204, b"")
        assert (await http.post(url, content=b"close")).content == b"bye"
        assert (await http.post(url, content=b"x")).status_code == 204
    assert len(accepted) == 2  # the 204 kept the connection, the close did not


async def test_events_arrive_as_they_are_sent() -> None:
    """A stream's first event is read before the server has sent the second one."""
    first_read = asyncio.Event()

    async def events(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\ndata: 1\n\n\r\n" % 9
            )
            await writer.drain()
            await first_read.wait()
            writer.write(b"%x\r\ndata: 2\n\n\r\n0\r\n\r\n" % 9)
            await writer.drain()

    async with serve(events) as (port, accepted), client() as http:
        for _ in range(2):
            first_read.clear()
            lines: list[str] = []
            async with http.stream("POST", f"http://127.0.0.1:{port}/", content=b"") as answer:
                async for line in answer.aiter_lines():
                    if line:
                        lines.append(line)
                        first_read.set()
            assert lines == ["data: 1", "data: 2"]
    assert len(accepted) == 1  # streams read to their end give their connection back


async def test_closing_a_stream_early_closes_its_connection() -> None:
    """A client that goes away mid-stream: the upstream sees its connection closed."""
    closed = asyncio.Event()

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if closed.is_set():
            await echo(reader, writer)  # the request after: answered
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(b"%x\r\ndata: 1\n\n\r\n" % 9)
        await writer.drain()
        if await reader.read(1) == b"":
            closed.set()

    async with serve(endless) as (port, accepted), client() as http:
        async with http.stream("POST", f"http://127.0.0.1:{port}/", content=b"") as answer:
            async for _ in answer.aiter_raw():
                break
        await asyncio.wait_for(closed.wait(), 5)
        await http.post(f"http://127.0.0.1:{port}/", content=b"")  # a new one, answered
    assert len(accepted) == 2


@pytest.mark.parametrize(
    "sent",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten b",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-le",
        b"",
    ],
    ids=["content-length", "chunked", "in-the-head", "before-answering"],
)
async def test_a_server_closing_mid_response_is_a_protocol_error(sent: bytes) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = await read_request(reader)
        if body == b"fine":
            writer.write(response(b"fine"))
        else:
            writer.write(sent)
        await writer.drain()  # and the server closes the connection

    async with serve(cut) as (port, _), client() as http:
        url = f"http://127.0.0.1:{port}/"
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post(url, content=b"x")
        assert (await http.post(url, content=b"fine")).content == b"fine"


async def test_a_reset_is_a_read_error() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nsome")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()  # RST, not FIN

    async with serve(reset) as (port, _), client() as http:
        with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
            await http.post(f"http://127.0.0.1:{port}/", content=b"x")


async def test_garbage_is_a_protocol_error() -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async with serve(garbage) as (port, _), client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post(f"http://127.0.0.1:{port}/", content=b"x")


async def test_a_silent_server_times_out_the_read_and_loses_the_connection() -> None:
    async def silent_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await read_request(reader)
            if body == b"wait":
                await asyncio.sleep(10)
            writer.write(response(body))
            await writer.drain()

    async with serve(silent_once) as (port, accepted), client() as http:
        url = f"http://127.0.0.1:{port}/"
        assert (await http.post(url, content=b"a")).content == b"a"
        with pytest.raises(httpx.ReadTimeout):
            await http.post(url, content=b"wait", timeout=0.2)
        assert (await http.post(url, content=b"b")).content == b"b"
    assert len(accepted) == 2  # the late answer can never be taken for the next one's


async def test_a_stalled_body_times_out_the_read() -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nab")
        await writer.drain()
        await asyncio.sleep(10)

    async with serve(stall) as (port, _), client() as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(f"http://127.0.0.1:{port}/", content=b"x", timeout=0.2)


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with serve(echo) as (port, _):
        pass  # closed: nothing listens on the port any more
    transport = HTTP1Transport()
    async with client(transport) as http:
        for _ in range(2):
            with pytest.raises(httpx.ConnectError):
                await http.post(f"http://127.0.0.1:{port}/", content=b"x")
    assert transport._open == 0  # failed connections do not count against the limit


async def test_an_unsupported_scheme_is_refused() -> None:
    async with client() as http:
        with pytest.raises(httpx.UnsupportedProtocol):
            await http.get("ftp://127.0.0.1/")
