"""Every pooled database connection busy past the pool's timeout: a 503 the client may retry
(database_unavailable, Retry-After), in the door's envelope, not a 500."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.core.errors import install_error_handlers
from app.messages.errors import anthropic_error_response


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app, {"/v1/messages": anthropic_error_response})

    async def exhausted() -> None:
        raise PoolTimeout("QueuePool limit of size 10 overflow 10 reached")

    app.post("/v1/chat/completions")(exhausted)
    app.post("/v1/messages")(exhausted)
    return app


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/v1/chat/completions", "server_error"), ("/v1/messages", "overloaded_error")],
)
async def test_pool_exhausted_is_a_503_to_retry(path: str, kind: str) -> None:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.post(path)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    error = response.json()["error"]
    assert error["type"] == kind
    assert "busy" in error["message"]
