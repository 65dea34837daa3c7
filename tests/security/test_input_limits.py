"""Input limits: too large -> 413, too many or malformed -> 400/422, in OpenAI's envelope,
and nothing is stored for a rejected request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream

USER = {"role": "user", "content": "hi"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


@pytest.fixture
async def limited(client_for: Any, make_settings: Callable[..., Settings]) -> httpx.AsyncClient:
    settings = make_settings(
        max_body_bytes=64 * 1024,
        max_messages=5,
        max_attachments=2,
        max_attachment_chars=100,
        max_tools=2,
    )
    client: httpx.AsyncClient = await client_for(settings)
    return client


def _envelope(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    return dict(error)


async def _nothing_stored(client: httpx.AsyncClient, fake_upstream: FakeUpstream) -> None:
    assert (await client.get("/v1/conversations")).json()["data"] == []
    assert fake_upstream.stats()["calls"] == 0


async def test_body_over_the_limit_is_413(
    limited: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 70_000}]}
    error = _envelope(await limited.post("/v1/chat/completions", json=body), 413)
    assert error["code"] == "payload_too_large"
    await _nothing_stored(limited, fake_upstream)


async def test_chunked_body_over_the_limit_is_413(limited: httpx.AsyncClient) -> None:
    async def chunks() -> Any:
        for _ in range(100):
            yield b"x" * 1024

    response = await limited.post("/v1/chat/completions", content=chunks())
    assert _envelope(response, 413)["code"] == "payload_too_large"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"model": "m", "messages": [USER] * 6}, 400, "too_many_messages"),
        (
            {"model": "m", "messages": [USER], "attachments": [{"content": "a"}] * 3},
            400,
            "too_many_attachments",
        ),
        (
            {"model": "m", "messages": [USER], "attachments": [{"content": "a" * 101}]},
            413,
            "attachment_too_large",
        ),
        ({"model": "m", "messages": [USER], "tools": [TOOL] * 3}, 400, "too_many_tools"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, 400, None),
        ({"model": "m", "messages": "hi"}, 400, None),
        ({"model": 5, "messages": [USER]}, 400, None),
        ({"messages": [USER]}, 400, None),
        ({"model": "m", "messages": []}, 400, None),
        ({"model": "m", "messages": [USER], "attachments": [{}]}, 400, None),
        ({"model": "m", "messages": [USER], "context": {"bogus": 1}}, 400, None),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, 400, None),
    ],
)
async def test_bad_requests_are_rejected_before_anything_is_stored(
    limited: httpx.AsyncClient,
    fake_upstream: FakeUpstream,
    body: dict[str, Any],
    status: int,
    code: str | None,
) -> None:
    error = _envelope(await limited.post("/v1/chat/completions", json=body), status)
    if code is not None:
        assert error["code"] == code
    await _nothing_stored(limited, fake_upstream)


@pytest.mark.parametrize("raw", [b"{not json", b"", b"[]", b"null", b'{"model": "m"'])
async def test_malformed_json(
    limited: httpx.AsyncClient, fake_upstream: FakeUpstream, raw: bytes
) -> None:
    response = await limited.post(
        "/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code in (400, 422), response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    await _nothing_stored(limited, fake_upstream)
