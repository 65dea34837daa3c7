"""Opaque ids (the request id, every stored row's), made in one place."""

from __future__ import annotations

import secrets

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """Opaque, unguessable ids such as ``conv_3f9c…``."""
    return f"{prefix}_{secrets.token_hex(12)}"
