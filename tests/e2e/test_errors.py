"""Every error shape, in OpenAI's envelope: validation, unknown ids, and each upstream failure.

One real server (upstream timeout 1 s) for the module; the upstream-credential and
connection-refused cases need their own settings and run in-process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer, free_port

MODEL = "gpt-4o-mini"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(
        tmp_path_factory,
        fake_upstream_server,
        {"CONTEXTGATE_REQUEST_TIMEOUT_S": "1"},
        name="errors",
    )


@pytest.fixture
def http(server: ContextgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture
def sdk(server: ContextgateServer) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=30)
    yield client
    client.close()


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is ``status`` with exactly OpenAI's error envelope; returns the error."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


def conversation_total(http: httpx.Client) -> int:
    total: int = http.get("/v1/conversations").json()["total"]
    return total


def chat(http: httpx.Client, content: str, **extra: Any) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], **extra}
    return http.post("/v1/chat/completions", json=body)


# --- validation: 400, nothing stored, upstream never called ---------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": MODEL, "messages": [{"role": "wizard", "content": "hi"}]}, "messages.0"),
        ({"model": MODEL}, "messages"),
        ({"model": MODEL, "messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": MODEL, "messages": [{"role": "tool", "content": "x"}]}, "messages.0"),
        ({"model": MODEL, "messages": "hello"}, "messages"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "context": {"x": 1}},
            "context",
        ),
        (
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": "x"}],
                "context": {"max_input_tokens": 0},
            },
            "context",
        ),
    ],
)
def test_invalid_request_is_400_in_openais_envelope(
    http: httpx.Client, fake_upstream: FakeUpstream, body: dict[str, Any], param: str
) -> None:
    before = conversation_total(http)
    error = error_of(http.post("/v1/chat/completions", json=body), 400)
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_request"
    assert str(error["param"]).startswith(param)
    assert fake_upstream.requests() == []
    assert conversation_total(http) == before


@pytest.mark.e2e
def test_malformed_json_is_400(http: httpx.Client, fake_upstream: FakeUpstream) -> None:
    response = http.post(
        "/v1/chat/completions",
        content=b'{"model": "gpt-4o-mini", "messages": [',
        headers={"content-type": "application/json"},
    )
    error = error_of(response, 400)
    assert "JSON" in error["message"]
    assert fake_upstream.requests() == []


@pytest.mark.e2e
def test_sdk_sees_a_bad_request_error(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model=MODEL, messages=[{"role": "wizard", "content": "hi"}])  # type: ignore[misc,list-item]
    assert info.value.status_code == 400
    assert isinstance(info.value.body, dict)
    assert info.value.body["type"] == "invalid_request_error"


@pytest.mark.e2e
def test_unknown_ids_and_routes_are_404(http: httpx.Client) -> None:
    error = error_of(http.get("/v1/conversations/conv_missing"), 404)
    assert error["code"] == "conversation_not_found"
    error = error_of(chat(http, "hi", conversation_id="conv_missing"), 404)
    assert error["code"] == "conversation_not_found"
    error = error_of(http.get("/v1/no-such-endpoint"), 404)
    assert error["type"] == "invalid_request_error"
    error_of(http.get("/v1/chat/completions"), 405)


# --- upstream failures ----------------------------------------------------------------------------


@pytest.mark.e2e
def test_upstream_400_passes_through_with_its_message(
    http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    before = conversation_total(http)
    fake_upstream.faults(MODEL, [{"status": 400, "message": "temperature is out of range"}])
    error = error_of(chat(http, "hi", temperature=5), 400)
    assert error["message"] == "temperature is out of range"
    assert error["type"] == "invalid_request_error"
    assert conversation_total(http) == before


@pytest.mark.e2e
def test_upstream_429_keeps_retry_after(sdk: openai.OpenAI, fake_upstream: FakeUpstream) -> None:
    fake_upstream.faults(MODEL, [{"status": 429, "headers": {"Retry-After": "3"}}])
    with pytest.raises(openai.RateLimitError) as info:
        sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "3"
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "rate_limit_exceeded"
    assert info.value.body["type"] == "rate_limit_error"


@pytest.mark.e2e
def test_upstream_429_on_a_stream_is_an_http_error_not_an_event(
    http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults(MODEL, [{"status": 429, "headers": {"Retry-After": "2"}}])
    response = chat(http, "hi", stream=True)
    error_of(response, 429)
    assert response.headers["retry-after"] == "2"


@pytest.mark.e2e
@pytest.mark.parametrize("status", [500, 503])
def test_upstream_5xx_is_502(http: httpx.Client, fake_upstream: FakeUpstream, status: int) -> None:
    before = conversation_total(http)
    fake_upstream.faults(MODEL, [{"status": status, "message": "upstream exploded"}])
    error = error_of(chat(http, "hi"), 502)
    assert error["code"] == "upstream_error"
    assert f"HTTP {status}" in error["message"]
    assert conversation_total(http) == before


@pytest.mark.e2e
def test_upstream_that_hangs_is_504(http: httpx.Client, fake_upstream: FakeUpstream) -> None:
    before = conversation_total(http)
    fake_upstream.faults(MODEL, [{"hang": True}])
    error = error_of(chat(http, "hi"), 504)
    assert error["code"] == "upstream_timeout"
    assert error["type"] == "timeout"
    assert conversation_total(http) == before


@pytest.mark.e2e
def test_upstream_that_hangs_before_the_first_chunk_of_a_stream_is_504(
    http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults(MODEL, [{"hang": True}])
    error = error_of(chat(http, "hi", stream=True), 504)
    assert error["type"] == "timeout"
    assert error["code"] in ("upstream_timeout", "first_token_timeout")


# --- upstream credentials and reachability (their own settings; in-process) ----------------------


async def test_upstream_refusing_our_key_is_502(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(upstream_api_key="reject-me"))
    response = await client.post(
        "/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
    )
    error = error_of(response, 502)
    assert error["code"] == "upstream_auth_failed"
    assert "credentials" in error["message"]
    assert fake_upstream.requests()[-1]["headers"]["authorization"] == "Bearer reject-me"
    assert (await client.get("/v1/conversations")).json()["total"] == 0


async def test_upstream_refusing_connections_is_502(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    client = await client_for(make_settings(upstream_base_url=closed))
    for stream in (False, True):
        response = await client.post(
            "/v1/chat/completions",
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": "hi"}],
                "stream": stream,
            },
        )
        error = error_of(response, 502)
        assert error["code"] == "upstream_unreachable"
        assert error["message"].startswith("Could not reach the upstream")
    assert (await client.get("/v1/conversations")).json()["total"] == 0
