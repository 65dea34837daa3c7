"""``read_response`` (app/llm/http1.py) against httpx's ``aread`` + ``aclose``: the same answers
from real loopback servers, read both ways, must give the same body (decoded), the same error
(type, message, request) and leave the pool the same (connection kept or closed, reused)."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Awaitable, Callable

import httpx
import pytest

from app.llm.http1 import HTTP1Transport, read_response
from tests.support.loopback import chunked, read_request, response, serve

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]
BIG = bytes(range(256)) * 2400  # 600 KiB: past the connection's 256 KiB read pause


def sends(*parts: bytes, pause: float = 0.02, then_sleep: float = 0.0) -> Writer:
    async def write(writer: asyncio.StreamWriter) -> None:
        for index, part in enumerate(parts):
            if index:
                await asyncio.sleep(pause)
            writer.write(part)
            await writer.drain()
        if then_sleep:
            await asyncio.sleep(then_sleep)

    return write


def reset_after(part: bytes) -> Writer:
    async def write(writer: asyncio.StreamWriter) -> None:
        writer.write(part)
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()

    return write


def head(*headers: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n"


packed = gzip.compress(b'{"answer": "hello world"}')
deflated = zlib.compress(b"deflated body")
SCENARIOS: dict[str, Writer] = {
    "one-write": sends(response(b'{"a": 1}')),
    "several-writes": sends(head(b"content-length: 12"), b"hello", b" ", b"world!"),
    "head-then-body": sends(head(b"content-length: 4"), b"body"),
    "chunked": sends(head(b"transfer-encoding: chunked"), chunked(b"ab", b"cd"), pause=0.01),
    "gzip": sends(response(packed, headers=b"content-encoding: gzip\r\n")),
    "gzip-split": sends(
        head(b"content-encoding: gzip", b"content-length: %d" % len(packed)),
        packed[:9],
        packed[9:],
    ),
    "deflate": sends(response(deflated, headers=b"Content-Encoding: deflate\r\n")),
    "unknown-encoding": sends(response(b"as is", headers=b"content-encoding: x-custom\r\n")),
    "bad-gzip": sends(response(b"not gzip at all", headers=b"content-encoding: gzip\r\n")),
    "no-content": sends(b"HTTP/1.1 204 No Content\r\n\r\n"),
    "empty": sends(response(b"")),
    "until-close": sends(head(b"content-type: text/plain"), b"part one, ", b"part two"),
    "big": sends(response(BIG)),
    "short-body": sends(head(b"content-length: 100"), b"only ten b"),
    "short-chunked": sends(head(b"transfer-encoding: chunked"), b"5\r\nhello\r\n"),
    "reset": reset_after(head(b"content-length: 100") + b"some"),
    "garbage-after": sends(response(b"ok") + b"HTTP/1.1 200 OK\r\n\r\n"),
    "stalled": sends(head(b"content-length: 10"), b"ab", then_sleep=2.0),
}


async def read_once(scenario: Writer, *, direct: bool) -> tuple[object, ...]:
    """What reading the scenario's answer gives, then what a second request on the pool gets."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await read_request(reader)
            if body == b"scenario":
                await scenario(writer)
                return  # the server closes the connection
            writer.write(response(b"next"))
            await writer.drain()

    transport = HTTP1Transport()
    async with serve(handler) as (port, accepted):
        url = f"http://127.0.0.1:{port}/v1"

        async def call(content: bytes) -> httpx.Response:
            request = httpx.Request(
                "POST", url, content=content, extensions={"timeout": httpx.Timeout(0.5).as_dict()}
            )
            answer = await transport.handle_async_request(request)
            answer.request = request
            return answer

        await read_response(await call(b"warm"))  # a connection in the pool: reused below
        answer = await call(b"scenario")
        outcome: tuple[object, ...]
        try:
            if direct:
                content = await read_response(answer)
            else:
                try:
                    content = await answer.aread()
                finally:
                    await answer.aclose()
        except httpx.HTTPError as exc:
            outcome = (type(exc), str(exc), exc.request is answer.request)
        else:
            outcome = ("ok", content, answer.content, answer.num_bytes_downloaded)
        state = (answer.is_closed, answer.is_stream_consumed, transport._idle_count)
        await asyncio.sleep(0.05)  # a close by the server reaches the idle connection
        after = await read_response(await call(b"again"))
        await transport.aclose()
        return outcome, state, after, len(accepted)


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_read_response_reads_as_httpx_does(name: str) -> None:
    expected = await read_once(SCENARIOS[name], direct=False)
    assert await read_once(SCENARIOS[name], direct=True) == expected


async def test_the_bodies_are_the_servers() -> None:
    """The differential test above, pinned: not both ways equally wrong."""
    outcome, state, after, accepted = await read_once(SCENARIOS["gzip-split"], direct=True)
    assert outcome == ("ok", b'{"answer": "hello world"}', b'{"answer": "hello world"}', 45)
    assert state == (True, True, 1)  # complete and keep-alive: back in the pool
    assert after == b"next"
    assert accepted == 2  # the server closed it after the scenario: a new one for "again"
    outcome, *_ = await read_once(SCENARIOS["big"], direct=True)
    assert outcome[1] == BIG
    outcome, *_ = await read_once(SCENARIOS["short-body"], direct=True)
    assert outcome[0] is httpx.RemoteProtocolError
    outcome, *_ = await read_once(SCENARIOS["stalled"], direct=True)
    assert outcome[0] is httpx.ReadTimeout


async def test_a_connection_read_directly_is_reused() -> None:
    async def keep(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            body = await read_request(reader)
            writer.write(head(b"content-length: %d" % len(body)))
            await writer.drain()
            await asyncio.sleep(0.01)  # the body a read later than the head
            writer.write(body)
            await writer.drain()

    transport = HTTP1Transport()
    async with serve(keep) as (port, accepted):
        for index in range(3):
            request = httpx.Request("POST", f"http://127.0.0.1:{port}/", content=b"n%d" % index)
            answer = await transport.handle_async_request(request)
            assert await read_response(answer) == b"n%d" % index
            assert transport._idle_count == 1
        await transport.aclose()
    assert len(accepted) == 1


async def test_other_responses_are_read_by_httpx() -> None:
    answer = httpx.Response(200, content=gzip.compress(b"x"), headers={"content-encoding": "gzip"})
    assert await read_response(answer) == b"x"
    assert answer.is_closed
