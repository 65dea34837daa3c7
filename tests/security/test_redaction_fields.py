"""Issue 24.1: an upstream key echoed in *any* field of an upstream error is masked, on every door.

Some providers echo the Authorization header in the error's ``code`` (or ``param``, ``type``),
not only in its ``message``. The fake upstream does so on request (``quote_key_in``), before any
byte of an answer or as an SSE error event mid-stream; an Anthropic upstream (litellm's anthropic
provider) sends the key in its error ``type``. Through every door (chat, Responses, Messages,
embeddings), streamed or not, on both transports (direct and litellm) and both databases: the key
reaches neither the client's answer nor the request log. (Logs: tests/plugins/log_capture.py
fails the session on any "s3cr3t" in any log record.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.core.errors import BadRequest
from app.core.redact import MASK
from app.core.settings import Settings
from app.llm.errors import map_upstream_error
from app.llm.openai_compat import UpstreamHTTPError
from tests.fake_upstream import FakeUpstream
from tests.support.models import ANTHROPIC_LITELLM_MODEL

KEY = "plain-upstream-s3cr3t-7f3a9c2e"  # not key-shaped: masked because contextgate knows it
ANTHROPIC_KEY = "anthropic-s3cr3t-51be07d4aa"
FIELDS = ["code", "param", "type"]


def _door(door: str, model: str, stream: bool) -> tuple[str, dict[str, Any]]:
    text_in = f"probe {door} {stream}"
    if door == "chat":
        body: dict[str, Any] = {"messages": [{"role": "user", "content": text_in}]}
        return "/v1/chat/completions", {"model": model, "stream": stream, **body}
    if door == "responses":
        return "/v1/responses", {"model": model, "input": text_in, "stream": stream}
    if door == "messages":
        body = {"max_tokens": 64, "messages": [{"role": "user", "content": text_in}]}
        return "/v1/messages", {"model": model, "stream": stream, **body}
    return "/v1/embeddings", {"model": model, "input": text_in}


async def _stored(database_url: str) -> str:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT * FROM request_logs"))).all()
            responses = (await connection.execute(text("SELECT * FROM responses"))).all()
    finally:
        await engine.dispose()
    return repr(rows) + repr(responses)


DOORS = [
    ("chat", False), ("chat", True), ("responses", False), ("responses", True),
    ("messages", False), ("messages", True), ("embeddings", False),
]  # fmt: skip


@pytest.mark.parametrize("transport", ["auto", "litellm"])
@pytest.mark.parametrize("status", [400, 401, 500])
async def test_key_in_code_param_and_type_is_masked_on_every_door(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
    transport: str,
    status: int,
) -> None:
    settings = make_settings(
        database_url=database_url, upstream_api_key=KEY, upstream_transport=transport
    )
    client: httpx.AsyncClient = await client_for(settings)
    for door, stream in DOORS:
        fault = {"status": status, "quote_key": True, "quote_key_in": FIELDS}
        fake_upstream.reset()  # also of the faults an SDK's own retry left unused
        fake_upstream.faults("*", [fault] * 3)
        path, body = _door(door, "gpt-4o-mini", stream)
        response = await client.post(path, json=body)
        assert fake_upstream.requests()[-1]["headers"]["authorization"] == f"Bearer {KEY}"
        assert response.status_code >= 400, (door, stream, response.text)
        assert KEY not in response.text, (door, stream, response.text)
        assert MASK in response.text, (door, stream, response.text)
    stored = await _stored(database_url)
    assert "Incorrect API key" in stored
    assert KEY not in stored


@pytest.mark.parametrize("transport", ["auto", "litellm"])
async def test_key_in_a_mid_stream_error_event_is_masked(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
    transport: str,
) -> None:
    settings = make_settings(
        database_url=database_url, upstream_api_key=KEY, upstream_transport=transport
    )
    client: httpx.AsyncClient = await client_for(settings)
    for door in ("chat", "responses", "messages"):
        fault = {
            "error_after_chunks": 2, "error_status": 400, "quote_key": True,
            "quote_key_in": FIELDS,
        }  # fmt: skip
        fake_upstream.reset()
        fake_upstream.faults("*", [fault] * 3)
        path, body = _door(door, "gpt-4o-mini", True)
        response = await client.post(path, json=body)
        assert response.status_code == 200, response.text
        assert "error" in response.text or "failed" in response.text, response.text
        assert KEY not in response.text, (door, response.text)
        assert MASK in response.text, (door, response.text)
    stored = await _stored(database_url)
    assert "Incorrect API key" in stored
    assert KEY not in stored


async def test_key_in_an_anthropic_error_type_is_masked(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    """An Anthropic upstream (litellm's anthropic provider) echoing the key in its error."""
    config = tmp_path / "models.yaml"
    config.write_text(
        "model_list:\n  - model_name: claude-up\n    litellm_params:\n"
        f"      model: {ANTHROPIC_LITELLM_MODEL}\n      api_base: {fake_upstream.url}\n"
        f"      api_key: {ANTHROPIC_KEY}\n"
    )
    client: httpx.AsyncClient = await client_for(make_settings(config=str(config)))
    error = {"type": ANTHROPIC_KEY, "message": f"invalid x-api-key {ANTHROPIC_KEY}"}
    for door, stream in DOORS[:6]:
        fake_upstream.reset()
        fake_upstream.faults("*", [{"status": 400, "body": {"type": "error", "error": error}}] * 3)
        path, body = _door(door, "claude-up", stream)
        response = await client.post(path, json=body)
        assert fake_upstream.requests()[-1]["headers"]["x-api-key"] == ANTHROPIC_KEY
        assert response.status_code >= 400, (door, stream, response.text)
        assert ANTHROPIC_KEY not in response.text, (door, stream, response.text)


def test_every_string_field_of_a_mapped_error_is_masked() -> None:
    """The one place (map_upstream_error) masks message, code, param, type and headers, also
    of an error that is already contextgate's own."""
    from app.core.redact import redactor

    redactor.add(KEY)
    raised = UpstreamHTTPError(400, {"error": {"message": f"bad {KEY}", "code": f"Bearer {KEY}"}})
    mapped = map_upstream_error(raised, "m")
    assert (mapped.status_code, mapped.code) == (400, f"Bearer {MASK}")
    assert KEY not in mapped.message
    own = BadRequest(KEY, code=KEY, param=KEY, error_type=KEY, headers={"x": KEY})
    mapped = map_upstream_error(own, "m")
    assert KEY not in repr((mapped.message, mapped.code, mapped.param, mapped.error_type))
    assert KEY not in repr(mapped.headers)
    assert KEY not in str(mapped)


@pytest.mark.parametrize("stream", [False, True])
async def test_key_in_a_native_responses_error_is_masked(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
    stream: bool,
) -> None:
    """/v1/responses on the upstream's own Responses API (CONTEXTGATE_RESPONSES_NATIVE)."""
    settings = make_settings(
        database_url=database_url, upstream_api_key=KEY, responses_native="always"
    )
    client: httpx.AsyncClient = await client_for(settings)
    for status in (400, 401, 500):
        fake_upstream.reset()
        fault = {"status": status, "quote_key": True, "quote_key_in": FIELDS}
        fake_upstream.faults("*", [fault] * 3)
        path, body = _door("responses", "gpt-4o-mini", stream)
        response = await client.post(path, json=body)
        assert fake_upstream.requests()[-1]["path"].endswith("/responses")
        assert KEY not in response.text, (status, response.text)
        assert MASK in response.text, (status, response.text)
    if stream:  # the upstream's own response.failed, after the answer began
        fake_upstream.reset()
        fault = {"error_after_chunks": 3, "quote_key": True, "quote_key_in": FIELDS}
        fake_upstream.faults("*", [fault])
        response = await client.post(path, json=body)
        assert "response.failed" in response.text, response.text
        assert KEY not in response.text, response.text
        assert MASK in response.text, response.text
    assert KEY not in await _stored(database_url)
