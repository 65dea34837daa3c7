"""Install the keys domain into a running app: the key resolver, the key service, the limits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request

from app.core.logging import install_redaction, register_secret
from app.core.state import AppState
from app.keys.auth import Caller
from app.keys.limits import KeyLimits
from app.keys.repository import key_repository
from app.keys.service import KeyService

__all__ = ["get_key_limits", "install_keys"]


def install_keys(app: FastAPI, state: AppState) -> Callable[[], Awaitable[None]]:
    """Wire keys into ``state``/``app.state``; returns the closer to call at shutdown."""
    settings = state.settings
    install_redaction()
    for secret in (settings.master_key, settings.upstream_api_key):
        if secret is not None:
            register_secret(secret.get_secret_value())
    if settings.master_key is not None:
        service = KeyService(state.database, settings.master_key.get_secret_value())
        app.state.key_service = service
        state.key_resolver = service.resolve

    async def spend(caller: Caller) -> tuple[float, float]:
        assert caller.key_id is not None
        async with state.database.reading() as session:
            return await key_repository.spend(session, caller.tenant_id, caller.key_id)

    redis: Any = None
    if settings.redis_url:
        import redis.asyncio as aioredis

        redis = aioredis.from_url(settings.redis_url)
    app.state.key_limits = KeyLimits(spend, redis=redis, budget_wait_s=settings.budget_wait_s)

    async def close() -> None:
        if redis is not None:
            await redis.aclose()

    return close


def get_key_limits(request: Request) -> KeyLimits | None:
    limits: KeyLimits | None = getattr(request.app.state, "key_limits", None)
    return limits
