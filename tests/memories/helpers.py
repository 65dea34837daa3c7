"""Helpers for the memory tests: chat turns, waiting for background work, summarizer JSON."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from app.state import AppState

SUMMARY = orjson.dumps(
    {
        "episodic": "The user counted turns and the assistant echoed each one.",
        "facts": [
            {"fact": "The user is counting turns", "type": "fact", "importance": 6},
            {"fact": "The user likes echoes", "type": "preference", "importance": 4},
        ],
    }
).decode()


def app_state(client: httpx.AsyncClient) -> AppState:
    transport: Any = client._transport  # the in-process ASGI transport of client_for
    state: AppState = transport.app.state.contextgate
    return state


async def drain(client: httpx.AsyncClient) -> None:
    """Wait until the app's background work (compaction, extraction) has finished."""
    state = app_state(client)
    while state.background:
        await asyncio.gather(*list(state.background), return_exceptions=True)


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


async def chat(
    client: httpx.AsyncClient,
    text: str,
    *,
    conversation_id: str | None = None,
    system: str | None = None,
    context: dict[str, Any] | None = None,
    user: str | None = None,
    model: str = "fake-model",
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": text})
    body: dict[str, Any] = {"model": model, "messages": messages}
    if conversation_id:
        body["conversation_id"] = conversation_id
    if context:
        body["context"] = context
    if user:
        body["user"] = user
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def upstream_chats(fake: Any, model: str = "fake-model") -> list[dict[str, Any]]:
    return [
        r["body"]
        for r in fake.requests()
        if r["path"].endswith("/chat/completions") and r["body"].get("model") == model
    ]
