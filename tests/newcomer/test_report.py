"""Issue 17 point 6: the report adds up, HEAD /health, the inspector's static files counted."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.metrics import scrape, value


def _parts(utilization: dict[str, Any]) -> int:
    return sum(int(v) for v in utilization["breakdown"].values())


async def test_tokens_used_is_the_sum_of_the_breakdown(client: httpx.AsyncClient) -> None:
    first = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Hello there, how are you?"},
            ],
            "attachments": [{"content": "Quarterly notes. " * 40, "title": "notes.md"}],
        },
    )
    assert first.status_code == 200, first.text
    body = first.json()
    second = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "conversation_id": body["conversation_id"],
            "messages": [{"role": "user", "content": "And now?"}],
        },
    )
    assert second.status_code == 200, second.text
    for answer in (body, second.json()):
        utilization = answer["context_utilization"]
        assert utilization["breakdown"]["overhead"] > 0
        assert utilization["tokens_used"] == _parts(utilization), utilization
    assert second.json()["context_utilization"]["breakdown"]["history"] > 0


async def test_head_health_answers_200(client: httpx.AsyncClient) -> None:
    response = await client.head("/health")
    assert response.status_code == 200
    assert response.content == b""


async def test_static_files_are_counted_under_their_route(client: httpx.AsyncClient) -> None:
    before = await scrape(client)
    response = await client.get("/ui/static/inspector.css")
    assert response.status_code == 200
    after = await scrape(client)
    for route, added in (("/ui/static/{path}", 1), ("unmatched", 0)):
        name = "contextgate_http_requests_total"
        assert value(after, name, route=route) - value(before, name, route=route) == added


async def test_passthrough_breakdown_adds_up_too(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "Straight through, please."}],
            "context": {"enabled": False},
        },
    )
    assert response.status_code == 200, response.text
    utilization = response.json()["context_utilization"]
    assert utilization["strategy"] == "passthrough"
    assert utilization["breakdown"]["overhead"] == 3
    assert utilization["tokens_used"] == _parts(utilization)
