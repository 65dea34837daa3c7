"""Who is calling: the tenant every query is scoped by (authentication: app/keys/auth.py)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Caller", "DEFAULT_TENANT"]

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Caller:
    tenant_id: str
    key_id: str | None = None
    is_admin: bool = False
    # A virtual key's limits (None: unlimited); enforced by app.keys.limits.
    rpm_limit: int | None = None
    max_budget: float | None = None
