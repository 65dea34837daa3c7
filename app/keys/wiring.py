"""Build the keys domain's long-lived parts for AppState: the key service, the limits and the
failed-auth throttle; and register the secrets the logs must never show."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.database import Database
from app.core.logging import install_redaction, register_secret
from app.core.settings import Settings
from app.keys.caller import Caller
from app.keys.limits import KeyLimits
from app.keys.repository import key_repository
from app.keys.service import KeyService
from app.keys.throttle import AuthThrottle

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "build_auth_throttle",
    "build_key_limits",
    "build_key_service",
    "install_secrets",
]


def install_secrets(settings: Settings) -> None:
    install_redaction()
    for secret in (settings.master_key, settings.upstream_api_key):
        if secret is not None:
            register_secret(secret.get_secret_value())


def build_key_service(settings: Settings, database: Database) -> KeyService | None:
    if settings.master_key is None:
        return None
    return KeyService(database, settings.master_key.get_secret_value())


def build_key_limits(settings: Settings, database: Database, redis: Redis | None) -> KeyLimits:
    async def spend(caller: Caller) -> tuple[float, float]:
        assert caller.key_id is not None
        async with database.reading() as session:
            return await key_repository.spend(session, caller.tenant_id, caller.key_id)

    return KeyLimits(spend, redis=redis, budget_wait_s=settings.budget_wait_s)


def build_auth_throttle(settings: Settings, redis: Redis | None) -> AuthThrottle:
    return AuthThrottle(
        settings.auth_max_failures if settings.master_key is not None else 0,
        settings.auth_failure_window_s,
        redis=redis,
    )
