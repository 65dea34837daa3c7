"""Shared bits of the end-to-end tests: one real server per module, SSE parsing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.proxy import ContextgateServer

# One function tool, as the SDK sends it.
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def module_server(
    tmp_path_factory: pytest.TempPathFactory,
    fake: FakeUpstream,
    env: dict[str, str] | None = None,
    *,
    name: str = "proxy",
) -> Iterator[ContextgateServer]:
    """``contextgate serve`` on its own SQLite file, forwarding to the session's fake upstream."""
    directory: Path = tmp_path_factory.mktemp(name)
    values = {
        "CONTEXTGATE_DATABASE_URL": f"sqlite+aiosqlite:///{directory / 'contextgate.db'}",
        "CONTEXTGATE_UPSTREAM_BASE_URL": fake.base_url,
        "CONTEXTGATE_MAX_RETRIES": "0",
        **(env or {}),
    }
    server = ContextgateServer(values, log_path=directory / "server.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def sse_events(response: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of an SSE response, decoded; ``[DONE]`` stays a string."""
    events: list[Any] = []
    for block in response.text.split("\n\n"):
        data = [line[5:].strip() for line in block.splitlines() if line.startswith("data:")]
        if not data:
            continue
        payload = "\n".join(data)
        events.append(payload if payload == "[DONE]" else orjson.loads(payload))
    return events
