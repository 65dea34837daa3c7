"""Schema truth: every timestamp in API output has a zone (UTC), /openapi.json declares the
400 answers (and no 422, which the API never gives), and a 405 names every allowed method."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx

from app.core.settings import Settings

MASTER = "sk-master-schema-truth-123"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def _timestamps(value: Any) -> Iterator[str | int]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("_at") and item is not None:
                yield item
            else:
                yield from _timestamps(item)
    elif isinstance(value, list):
        for item in value:
            yield from _timestamps(item)


async def test_every_timestamp_in_api_output_is_utc_with_a_zone(
    client_for: Any, make_settings: Callable[..., Settings]
) -> None:
    client: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    client.headers["Authorization"] = f"Bearer {MASTER}"
    chat = await client.post("/v1/chat/completions", json=CHAT)
    conversation_id = chat.json()["conversation_id"]
    attachment = await client.post("/v1/attachments", json={"content": "notes"})
    memory = await client.post("/v1/memories", json={"user": "ada", "content": "likes tea"})
    key = await client.post("/v1/keys", json={"name": "k", "expires_at": "2099-01-01T00:00Z"})
    bodies = [
        attachment.json(),
        memory.json(),
        key.json(),
        (await client.get("/v1/conversations")).json(),
        (await client.get(f"/v1/conversations/{conversation_id}")).json(),
        (await client.get(f"/v1/attachments/{attachment.json()['id']}")).json(),
        (await client.get("/v1/memories", params={"user": "ada"})).json(),
        (await client.get("/v1/keys")).json(),
    ]
    found = [stamp for body in bodies for stamp in _timestamps(body)]
    assert len(found) >= 10
    for stamp in found:
        if isinstance(stamp, int):  # OpenAI's objects' created_at: Unix seconds (UTC)
            assert abs(datetime.now(UTC).timestamp() - stamp) < 2 * 86400, stamp
            continue
        assert stamp.endswith(("Z", "+00:00")), stamp
        parsed = datetime.fromisoformat(stamp)
        assert parsed.utcoffset() == UTC.utcoffset(None), stamp
        assert abs((datetime.now(UTC) - parsed).days) < 2 or parsed.year == 2099


async def test_openapi_declares_400_in_the_error_envelope(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    assert "ErrorResponse" in document["components"]["schemas"]
    assert "HTTPValidationError" not in document["components"]["schemas"]
    checked = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            assert "422" not in responses, (method, path)
            assert "default" in responses, (method, path)
            if operation.get("requestBody") or operation.get("parameters"):
                assert "400" in responses, (method, path)
                schema = responses["400"]["content"]["application/json"]["schema"]
                assert schema["$ref"].endswith("ErrorResponse")
                checked += 1
            if path.startswith("/v1"):
                assert {"401", "429"} <= set(responses), (method, path)
    assert checked >= 8
    chat = document["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert {"400", "401", "413", "429"} <= set(chat)
    # and the API does answer 400 (not 422) for what the schema calls a bad request
    bad = await client.post("/v1/chat/completions", json={"model": 1})
    assert bad.status_code == 400


async def test_405_has_an_allow_header_with_every_method_of_the_path(
    client: httpx.AsyncClient,
) -> None:
    cases = {
        ("PUT", "/v1/keys"): "GET, POST",
        ("PATCH", "/v1/conversations/conv_x"): "DELETE, GET, POST",
        ("PUT", "/v1/memories"): "DELETE, GET, POST",
        ("GET", "/v1/chat/completions"): "POST",
        ("POST", "/health"): "GET, HEAD",
    }
    for (method, path), allowed in cases.items():
        response = await client.request(method, path)
        assert response.status_code == 405, (method, path)
        assert response.headers["allow"] == allowed, (method, path)
        error = response.json()["error"]
        assert error["code"] == "method_not_allowed"
        assert allowed in error["message"]
