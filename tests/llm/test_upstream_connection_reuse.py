"""Streams through the direct transport give their connection back to the pool.

A real HTTP/1.1 server on loopback (a few lines of asyncio) counts the TCP connections it
accepts: three streams in a row, each read to ``[DONE]``, must use one connection. A response
closed before the end of its body would cost every stream a new connection.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from app.llm.openai_compat import OpenAICompatTransport
from app.llm.routing import Deployment


def _chunked(events: list[bytes]) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(event), event) for event in events)
    return body + b"0\r\n\r\n"


def _sse_body() -> bytes:
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    return _chunked([b"data: " + orjson.dumps(chunk) + b"\n\n", b"data: [DONE]\n\n"])


class CountingServer:
    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                self.requests += 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n" + _sse_body()
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: Any) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def test_streams_read_to_done_reuse_one_connection() -> None:
    server = CountingServer()
    async with server as base_url:
        deployment = Deployment("m", "openai/m", {"api_base": base_url, "api_key": "k"})
        transport = OpenAICompatTransport()
        try:
            for _ in range(3):
                stream = await transport.open_stream(
                    deployment,
                    [{"role": "user", "content": "hi"}],
                    {},
                    httpx.Timeout(5.0),
                )
                events = [event async for event in stream]
                assert [e["choices"][0]["delta"]["content"] for e in events] == ["hi"]
        finally:
            await transport.aclose()
    assert server.requests == 3
    assert server.connections == 1
