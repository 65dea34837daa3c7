"""Virtual keys: how they look (``sk-cg-…``) and how they are stored (a peppered sha256).

The pepper is derived from the master key, so a stolen database alone cannot check guesses.
Rotating the master key therefore invalidates every virtual key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["KEY_PREFIX", "display_prefix", "generate_key", "hash_key", "pepper_from"]

KEY_PREFIX = "sk-cg-"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def pepper_from(master_key: str) -> bytes:
    return hashlib.sha256(b"contextgate/virtual-key-pepper\x00" + master_key.encode()).digest()


def hash_key(key: str, pepper: bytes) -> str:
    return hmac.new(pepper, key.encode(), hashlib.sha256).hexdigest()


def display_prefix(key: str) -> str:
    """Enough of a key for a person to recognise it in a list, not enough to use it."""
    return key[: len(KEY_PREFIX) + 4] + "…"
