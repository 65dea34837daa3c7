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

__all__ = ["Caller", "CallerDep", "DEFAULT_TENANT", "get_caller"]

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


async def get_caller(request: Request, state: Annotated[AppState, Depends(get_state)]) -> Caller:
    master = state.settings.master_key
    if master is None:
        return Caller(DEFAULT_TENANT, is_admin=True)
    presented = _bearer(request)
    if presented is None:
        raise Unauthorized(
            "Missing API key: send 'Authorization: Bearer <key>'.", code="missing_api_key"
        )
    if hmac.compare_digest(presented.encode(), master.get_secret_value().encode()):
        return Caller(DEFAULT_TENANT, is_admin=True)
    if state.key_resolver is not None:
        caller = await state.key_resolver(presented)
        if caller is not None:
            return caller
    raise Unauthorized("Incorrect API key provided.")


CallerDep = Annotated[Caller, Depends(get_caller)]
