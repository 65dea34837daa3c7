"""Authentication: which caller (app/keys/caller.py) a request stands for.

Without ``CONTEXTGATE_MASTER_KEY`` everything is one tenant (keep such a server on loopback).
With it, a request must carry the master key (tenant ``default``, admin) or a virtual key
(its own tenant).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated, Protocol

from fastapi import Depends, Request

from app.core.errors import BadRequest, Unauthorized
from app.core.settings import Settings
from app.keys.caller import DEFAULT_TENANT, Caller
from app.keys.limits import KeyLimits
from app.keys.service import KeyService
from app.keys.throttle import AuthThrottle

__all__ = [
    "CallerDep",
    "Gate",
    "KeyServiceDep",
    "authenticate",
    "client_address",
    "get_caller",
    "get_key_service",
]


class Gate(Protocol):
    """What authentication reads from the application's state (``app.state.AppState``)."""

    settings: Settings
    auth_throttle: AuthThrottle
    limits: KeyLimits
    # Virtual keys: issue, list, revoke, resolve (None without CONTEXTGATE_MASTER_KEY).
    keys: KeyService | None
    # Resolves a presented virtual key to its caller (``keys.resolve``; tests may swap it).
    key_resolver: Callable[[str], Awaitable[Caller | None]] | None


async def get_gate(request: Request) -> Gate:
    """FastAPI dependency (``async``: no thread hand-off for an attribute lookup)."""
    gate: Gate = request.app.state.contextgate
    return gate


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header and header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return request.headers.get("x-api-key") or header or None


def client_address(request: Request) -> str | None:
    return request.client.host if request.client is not None else None


async def authenticate(request: Request, state: Gate) -> Caller:
    """The caller the request's key stands for; 401 when there is none or it is wrong."""
    master = state.settings.master_key
    if master is None:
        return Caller(DEFAULT_TENANT, is_admin=True)
    presented = _bearer(request)
    if presented is None:
        raise Unauthorized(
            "Missing API key: send 'Authorization: Bearer <key>' (or 'x-api-key: <key>').",
            code="missing_api_key",
        )
    if hmac.compare_digest(presented.encode(), master.get_secret_value().encode()):
        return Caller(DEFAULT_TENANT, is_admin=True)
    if state.key_resolver is not None:
        caller = await state.key_resolver(presented)
        if caller is not None:
            return caller
    raise Unauthorized("Incorrect API key provided.")


async def get_caller(request: Request) -> Caller:
    """Every authenticated endpoint's dependency (``CallerDep``): failed-auth
    throttling per client address, the key, then the key's requests-per-minute limit.
    The state is read here rather than through ``get_gate``: a nested dependency is one more
    round of FastAPI's dependency solving on every request."""
    state: Gate = request.app.state.contextgate
    address = client_address(request)
    state.auth_throttle.check(address)
    try:
        caller = await authenticate(request, state)
    except Unauthorized:
        await state.auth_throttle.failed(address)
        raise
    await state.limits.check_rpm(caller)
    return caller


async def get_key_service(state: Annotated[Gate, Depends(get_gate)]) -> KeyService:
    if state.keys is None:
        raise BadRequest(
            "Virtual keys need CONTEXTGATE_MASTER_KEY to be set.", code="master_key_required"
        )
    return state.keys


CallerDep = Annotated[Caller, Depends(get_caller)]
KeyServiceDep = Annotated[KeyService, Depends(get_key_service)]
