"""Errors in Anthropic's envelope under /v1/messages, OpenAI's everywhere else."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from pydantic import BaseModel

from app.core.errors import NotFound, RateLimited, install_error_handlers
from app.messages.errors import anthropic_error_response


class Body(BaseModel):
    max_tokens: int


def build() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app, {"/v1/messages": anthropic_error_response})

    @app.post("/v1/messages")
    async def messages(body: Body) -> dict[str, int]:
        raise RateLimited("Slow down.", headers={"Retry-After": "3"})

    @app.post("/v1/messages/count_tokens")
    async def count(body: Body) -> dict[str, int]:
        raise NotFound("No such model.")

    @app.post("/v1/chat/completions")
    async def chat(body: Body) -> dict[str, int]:
        return {}

    @app.get("/v1/messagesx")
    async def lookalike() -> dict[str, int]:
        raise NotFound("Not the door.")

    return app


async def test_envelope_by_path_prefix() -> None:
    transport = httpx.ASGITransport(app=build())
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        invalid = await client.post("/v1/messages", json={})
        assert invalid.status_code == 400
        body = invalid.json()
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        assert "max_tokens" in body["error"]["message"]

        limited = await client.post("/v1/messages", json={"max_tokens": 1})
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "3"
        assert limited.json() == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "Slow down."},
        }
        missing = await client.post("/v1/messages/count_tokens", json={"max_tokens": 1})
        assert missing.json()["error"]["type"] == "not_found_error"
        unknown = await client.get("/v1/messages/nope")
        assert unknown.status_code in (404, 405)
        assert unknown.json()["type"] == "error"

        chat = await client.post("/v1/chat/completions", json={})
        assert chat.json()["error"]["type"] == "invalid_request_error"
        assert "type" not in chat.json()  # OpenAI's envelope
        lookalike = await client.get("/v1/messagesx")
        assert lookalike.json()["error"]["code"] == "not_found"
