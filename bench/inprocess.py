"""contextgate's ASGI app in this process, on a migrated database, with an httpx client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

import app  # noqa: F401  (offline defaults before litellm is imported)


def turn(text: str, conversation_id: str | None = None, *, stream: bool = False) -> dict[str, Any]:
    """The body of one small benchmark turn: a user message, continuing ``conversation_id``."""
    body: dict[str, Any] = {
        "model": "bench-model",
        "conversation_id": conversation_id,
        "messages": [{"role": "user", "content": text}],
    }
    if stream:
        body["stream"] = True
    return body


@asynccontextmanager
async def inprocess_app(
    upstream_base_url: str, database_url: str, **settings: Any
) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """(the FastAPI app, a client on ``/v1``) inside the app's lifespan; ``settings``
    override the bench defaults (no retries, WARNING logs, no ``.env``)."""
    from app.cli import run_migrations
    from app.core.settings import Settings
    from app.main import create_app

    await asyncio.to_thread(run_migrations, database_url)
    values: dict[str, Any] = {
        "database_url": database_url,
        "upstream_base_url": upstream_base_url,
        "upstream_api_key": "sk-bench",
        "max_retries": 0,
        "log_level": "WARNING",
        **settings,
    }
    application = create_app(Settings(**values, _env_file=None))  # type: ignore[call-arg]
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://cg/v1") as client:
            yield application, client
