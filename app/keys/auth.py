"""Who is calling: the tenant every query is scoped by.

Without ``CONTEXTGATE_MASTER_KEY`` everything is one tenant (keep such a server on loopback).
With it, a request must carry the master key (tenant ``default``, admin) or a virtual key
(its own tenant).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.core.errors import Unauthorized
from app.core.state import AppState, get_state

__all__ = ["Caller", "DEFAULT_TENANT", "authenticate", "client_address", "get_caller"]

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Caller:
    tenant_id: str
    key_id: str | None = None
    is_admin: bool = False
    # A virtual key's limits (None: unlimited); enforced by app.keys.limits.
    rpm_limit: int | None = None
    max_budget: float | None = None


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header and header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return request.headers.get("x-api-key") or header or None


def client_address(request: Request) -> str | None:
    return request.client.host if request.client is not None else None


async def authenticate(request: Request, state: AppState) -> Caller:
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


async def get_caller(request: Request, state: Annotated[AppState, Depends(get_state)]) -> Caller:
    """Every authenticated endpoint's dependency (``app.core.deps.CallerDep``): failed-auth
    throttling per client address, the key, then the key's requests-per-minute limit."""
    address = client_address(request)
    state.auth_throttle.check(address)
    try:
        caller = await authenticate(request, state)
    except Unauthorized:
        await state.auth_throttle.failed(address)
        raise
    await state.limits.check_rpm(caller)
    return caller
