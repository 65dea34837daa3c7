"""What the direct transport sends, seen from real loopback servers: no cookie ever comes back
to an upstream (one client serves every tenant), and a proxy from the environment is used,
or skipped for NO_PROXY hosts, as the OpenAI SDK would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import orjson
import pytest

from app import __version__
from app.llm.openai_compat import OpenAICompatTransport
from app.llm.routing import Deployment

COMPLETION = orjson.dumps(
    {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
     "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                  "finish_reason": "stop"}]}
)  # fmt: skip
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@dataclass
class Seen:
    """Request lines and lower-cased headers of every request a server answered."""

    lines: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


@asynccontextmanager
async def answering_server() -> AsyncIterator[tuple[str, Seen]]:
    """An upstream (or an HTTP proxy: it answers absolute-form requests itself) that sets a
    cookie on every response. Yields ``host:port`` and what it saw."""
    seen = Seen()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (line.partition(":") for line in head[1:] if line)
                }
                await reader.readexactly(int(headers.get("content-length", "0")))
                seen.lines.append(head[0])
                seen.headers.append(headers)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"set-cookie: affinity=tenant-a; Path=/\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(COMPLETION), COMPLETION)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


def _clear_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


async def _complete_twice(api_base: str) -> None:
    transport = OpenAICompatTransport()
    target = Deployment("m", "openai/m", {"api_base": api_base, "api_key": "sk-x"})
    try:
        for _ in range(2):
            data = await transport.complete(
                target, [{"role": "user", "content": "hi"}], {}, httpx.Timeout(5)
            )
            assert data["choices"][0]["message"]["content"] == "hi"
    finally:
        await transport.aclose()


async def test_no_cookie_goes_back_to_the_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_proxies(monkeypatch)
    async with answering_server() as (address, seen):
        await _complete_twice(f"http://{address}/v1")
    assert seen.lines == ["POST /v1/chat/completions HTTP/1.1"] * 2
    assert all("cookie" not in headers for headers in seen.headers)
    first = seen.headers[0]
    assert first["user-agent"] == f"contextgate/{__version__}"
    assert first["host"] == address
    assert first["authorization"] == "Bearer sk-x"


async def test_a_proxy_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_proxies(monkeypatch)
    async with answering_server() as (proxy, seen):
        monkeypatch.setenv("HTTP_PROXY", f"http://{proxy}")
        await _complete_twice("http://upstream.invalid:8000/v1")
    # Absolute-form request lines: the proxy was asked to reach the upstream.
    assert seen.lines == ["POST http://upstream.invalid:8000/v1/chat/completions HTTP/1.1"] * 2
    assert all("cookie" not in headers for headers in seen.headers)


async def test_no_proxy_hosts_skip_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_proxies(monkeypatch)
    async with answering_server() as (proxy, via_proxy), answering_server() as (address, direct):
        monkeypatch.setenv("HTTP_PROXY", f"http://{proxy}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        await _complete_twice(f"http://{address}/v1")
    assert via_proxy.lines == []
    assert direct.lines == ["POST /v1/chat/completions HTTP/1.1"] * 2
    assert all("cookie" not in headers for headers in direct.headers)
