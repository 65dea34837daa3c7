"""Tiny HTTP/1.1 servers on loopback for the upstream pool's tests (tests/llm/test_http1*.py):
a handler per connection on asyncio streams, and helpers to read a request and write an
answer. Real sockets, so that what is tested is what goes over the wire."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import trustme

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
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0, ssl=ssl_context)
    async with server:
        yield server.sockets[0].getsockname()[1], accepted


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """The body of the next request (Content-Length framed)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return await reader.readexactly(length)


def response(body: bytes, *, close: bool = False, headers: bytes = b"") -> bytes:
    connection = b"close" if close else b"keep-alive"
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n" + headers
        + b"content-length: " + str(len(body)).encode() + b"\r\nconnection: " + connection
        + b"\r\n\r\n" + body
    )  # fmt: skip


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request on the connection with its own body."""
    while True:
        body = await read_request(reader)
        writer.write(response(body))
        await writer.drain()


def tls_contexts(certified_host: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for ``certified_host``, and a client context
    that trusts its authority."""
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(certified_host).configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    return server_context, client_context
