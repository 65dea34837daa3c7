"""Idempotency-Key: a replay returns the stored answer without calling upstream; a concurrent
duplicate gets 409; the same key with another body 400; keys are scoped per tenant."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import httpx
from starlette.responses import Response

from app.core.settings import Settings
from app.keys.caller import DEFAULT_TENANT, Caller
from app.keys.limits import Reservation
from app.turns.guard import guarded
from tests.fake_upstream import FakeUpstream

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "once"}]}


async def test_replay_returns_the_stored_answer_without_upstream(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    headers = {"Idempotency-Key": "order-1"}
    first = await client.post("/v1/chat/completions", json=BODY, headers=headers)
    assert first.status_code == 200, first.text
    second = await client.post("/v1/chat/completions", json=BODY, headers=headers)
    assert second.status_code == 200
    assert second.json() == first.json()
    assert second.headers["x-conversation-id"] == first.headers["x-conversation-id"]
    assert second.headers["idempotent-replayed"] == "true"
    assert fake_upstream.stats()["calls"] == 1
    detail = (await client.get(f"/v1/conversations/{first.json()['conversation_id']}")).json()
    assert detail["message_count"] == 2  # stored once


async def test_stream_replay(client: httpx.AsyncClient, fake_upstream: FakeUpstream) -> None:
    headers = {"Idempotency-Key": "stream-1"}
    body = {**BODY, "stream": True}
    first = await client.post("/v1/chat/completions", json=body, headers=headers)
    second = await client.post("/v1/chat/completions", json=body, headers=headers)
    assert first.text.endswith("data: [DONE]\n\n")
    assert second.text == first.text
    assert second.headers["content-type"].startswith("text/event-stream")
    assert fake_upstream.stats()["calls"] == 1


async def test_concurrent_duplicate_gets_409(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults("*", [{"delay_ms": 400}])
    headers = {"Idempotency-Key": "slow-1"}
    first = asyncio.create_task(client.post("/v1/chat/completions", json=BODY, headers=headers))
    while fake_upstream.stats()["calls"] == 0:
        await asyncio.sleep(0.02)
    duplicate = await client.post("/v1/chat/completions", json=BODY, headers=headers)
    assert duplicate.status_code == 409, duplicate.text
    assert duplicate.json()["error"]["code"] == "idempotency_key_in_use"
    assert (await first).status_code == 200
    assert fake_upstream.stats()["calls"] == 1


async def test_other_body_same_key_is_400(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "k"}
    assert (await client.post("/v1/chat/completions", json=BODY, headers=headers)).is_success
    other = {**BODY, "messages": [{"role": "user", "content": "different"}]}
    response = await client.post("/v1/chat/completions", json=other, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "idempotency_key_reused"


async def test_failed_request_frees_the_key(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    headers = {"Idempotency-Key": "retry-me"}
    fake_upstream.faults("*", [{"status": 500}])
    failed = await client.post("/v1/chat/completions", json=BODY, headers=headers)
    assert failed.status_code == 502
    retried = await client.post("/v1/chat/completions", json=BODY, headers=headers)
    assert retried.status_code == 200, retried.text


async def test_keys_are_scoped_per_tenant(
    client_for: Any, make_settings: Callable[..., Settings], fake_upstream: FakeUpstream
) -> None:
    master = "sk-master-idem-123456"
    client: httpx.AsyncClient = await client_for(make_settings(master_key=master))
    auth = {"Authorization": f"Bearer {master}"}
    keys = [
        (await client.post("/v1/keys", json={"name": n}, headers=auth)).json()["key"]
        for n in ("a", "b")
    ]
    answers = []
    for key in keys:
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "shared"}
        response = await client.post("/v1/chat/completions", json=BODY, headers=headers)
        assert response.status_code == 200
        assert "idempotent-replayed" not in response.headers
        answers.append(response.json()["conversation_id"])
    assert answers[0] != answers[1]
    assert fake_upstream.stats()["calls"] == 2


async def test_the_request_is_dumped_for_its_fingerprint_only_with_a_key() -> None:
    """``guarded`` takes the door's request as a callable: without an Idempotency-Key there
    is nothing to fingerprint, and the request is not dumped (a pydantic dump per request)."""

    async def admit(caller: Caller) -> Reservation:
        return Reservation()

    def payload() -> dict[str, object]:
        raise AssertionError("dumped without an Idempotency-Key")

    async def answer() -> Response:
        return Response(b"ok")

    state: Any = SimpleNamespace(limits=SimpleNamespace(admit=admit))
    request: Any = None
    response = await guarded(request, state, Caller(DEFAULT_TENANT), payload, None, answer)
    assert response.body == b"ok"
