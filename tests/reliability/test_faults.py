"""The fault suite: what reaches the fake upstream, and what the client sees, for each fault.

One retry loop in the system: with max_retries=N exactly N+1 calls reach the upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
FAST_RETRIES = {"retry_backoff_s": 0.01, "retry_max_backoff_s": 2.0}


async def _client(client_for: Any, make_settings: Callable[..., Settings], **kw: Any) -> Any:
    return await client_for(make_settings(**{**FAST_RETRIES, **kw}))


def _assert_envelope(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return dict(error)


async def test_429_with_retry_after_then_success(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    client = await _client(client_for, make_settings, max_retries=2)
    fake_upstream.faults("*", [{"status": 429, "headers": {"Retry-After": "0.05"}}])
    response = await client.post("/v1/chat/completions", json=BODY)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Echo: hello"
    assert fake_upstream.stats()["calls"] == 2


async def test_429_forever_gives_up_after_n_plus_one_calls(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    client = await _client(client_for, make_settings, max_retries=3)
    fake_upstream.faults("*", [{"status": 429, "headers": {"Retry-After": "0.01"}}] * 10)
    response = await client.post("/v1/chat/completions", json=BODY)
    error = _assert_envelope(response, 429)
    assert error["type"] == "rate_limit_error"
    assert response.headers["retry-after"] == "1"
    assert fake_upstream.stats()["calls"] == 4


async def test_retry_after_beyond_the_backoff_cap_is_not_waited_for(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    client = await _client(client_for, make_settings, max_retries=3)
    fake_upstream.faults("*", [{"status": 429, "headers": {"Retry-After": "30"}}])
    response = await client.post("/v1/chat/completions", json=BODY)
    _assert_envelope(response, 429)
    assert response.headers["retry-after"] == "30"
    assert fake_upstream.stats()["calls"] == 1


async def test_500s_then_success(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    client = await _client(client_for, make_settings, max_retries=2)
    fake_upstream.faults("*", [{"status": 500}, {"status": 503}])
    response = await client.post("/v1/chat/completions", json=BODY)
    assert response.status_code == 200, response.text
    assert fake_upstream.stats()["calls"] == 3


async def test_500_forever_maps_to_502(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    client = await _client(client_for, make_settings, max_retries=2)
    fake_upstream.faults("*", [{"status": 500}] * 5)
    response = await client.post("/v1/chat/completions", json=BODY)
    error = _assert_envelope(response, 502)
    assert error["code"] == "upstream_error"
    assert fake_upstream.stats()["calls"] == 3


@pytest.mark.parametrize(("status", "expected"), [(400, 400), (401, 502), (404, 404), (422, 400)])
async def test_4xx_is_not_retried(
    client_for: Any,
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    status: int,
    expected: int,
) -> None:
    client = await _client(client_for, make_settings, max_retries=3)
    fake_upstream.faults("*", [{"status": status}] * 5)
    response = await client.post("/v1/chat/completions", json=BODY)
    _assert_envelope(response, expected)
    assert fake_upstream.stats()["calls"] == 1


async def test_hang_times_out_with_504(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    client = await _client(client_for, make_settings, max_retries=2, request_timeout_s=0.5)
    fake_upstream.faults("*", [{"hang": True}])
    response = await client.post("/v1/chat/completions", json=BODY)
    error = _assert_envelope(response, 504)
    assert error["code"] == "upstream_timeout"
    assert fake_upstream.stats()["calls"] == 1  # a timeout is not retried


async def test_stream_first_token_timeout(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    client = await _client(client_for, make_settings, first_token_timeout_s=0.5)
    fake_upstream.faults("*", [{"delay_ms": 30_000}])
    response = await client.post("/v1/chat/completions", json={**BODY, "stream": True})
    error = _assert_envelope(response, 504)
    assert error["code"] == "first_token_timeout"


@pytest.fixture
def unaccepting_port() -> Iterator[int]:
    """A loopback port whose accept backlog is full: a new connection attempt hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = int(server.getsockname()[1])
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in [*fillers, server]:
        sock.close()


async def test_connect_timeout_fires_before_the_total_timeout(
    client_for: Any, make_settings: Callable[..., Settings], unaccepting_port: int
) -> None:
    client = await _client(
        client_for,
        make_settings,
        upstream_base_url=f"http://127.0.0.1:{unaccepting_port}/v1",
        connect_timeout_s=0.3,
        request_timeout_s=120,
    )
    # With only the total timeout this would wait two minutes; the test would time out.
    response = await asyncio.wait_for(client.post("/v1/chat/completions", json=BODY), 30)
    assert response.status_code in (502, 504), response.text


async def test_fallback_model_from_config(
    client_for: Any,
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    config = tmp_path / "models.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: primary\n"
        "    litellm_params: {model: openai/fake-primary, api_base: "
        f"{fake_upstream.base_url}, api_key: sk-test-primary}}\n"
        "  - model_name: backup\n"
        "    litellm_params: {model: openai/fake-backup, api_base: "
        f"{fake_upstream.base_url}, api_key: sk-test-backup}}\n"
        "router_settings:\n"
        "  fallbacks: [{primary: [backup]}]\n"
    )
    client = await _client(client_for, make_settings, max_retries=1, config=config)
    fake_upstream.faults("fake-primary", [{"status": 503}] * 2)
    response = await client.post("/v1/chat/completions", json={**BODY, "model": "primary"})
    assert response.status_code == 200, response.text
    models = [r["body"]["model"] for r in fake_upstream.requests()]
    assert models == ["fake-primary", "fake-primary", "fake-backup"]


async def test_client_cannot_redirect_the_upstream_call(
    client, fake_upstream: FakeUpstream
) -> None:  # type: ignore[no-untyped-def]
    body = {**BODY, "api_base": "http://127.0.0.1:9/v1", "api_key": "sk-stolen", "timeout": 1e9}
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    sent = fake_upstream.requests()[-1]
    assert "api_base" not in sent["body"]
    assert sent["headers"]["authorization"] != "Bearer sk-stolen"


def test_stored_error_body_is_openai_shaped() -> None:
    from app.core.errors import error_body

    assert orjson.loads(orjson.dumps(error_body("m", "t")))["error"]["code"] is None
