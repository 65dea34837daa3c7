"""Who may open /ui: anyone when no master key is set; otherwise the master key holder.

The key comes as ``Authorization: Bearer``, once as ``?key=`` (then swapped for a cookie and a
redirect, so it leaves the address bar), or from the login form. The cookie holds a random
session token; the database holds its hash, when it expires (``CONTEXTGATE_UI_SESSION_TTL_S``)
and an HMAC of the master key that opened it. Logout deletes the session, and a session opened
with another master key (after a rotation) is not accepted.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime, timedelta

from fastapi import Request

from app.core.deps import Storage
from app.core.settings import Settings
from app.core.timestamps import as_utc
from app.db.models import UiSession
from app.ui.repository import ui_session_repository as repository

__all__ = ["COOKIE", "close_session", "is_authorized", "key_matches", "open_session"]

COOKIE = "contextgate_ui"


def _fingerprint(settings: Settings) -> str:
    master = settings.master_key
    assert master is not None
    return hmac.new(
        master.get_secret_value().encode(), b"contextgate-ui-session", hashlib.sha256
    ).hexdigest()


def _session_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def key_matches(settings: Settings, presented: str | None) -> bool:
    master = settings.master_key
    if master is None:
        return True
    if not presented:
        return False
    return hmac.compare_digest(presented.encode(), master.get_secret_value().encode())


async def open_session(state: Storage) -> str:
    """A new session for the master key holder; returns the cookie's token."""
    token = secrets.token_urlsafe(32)
    now = datetime.now(UTC)
    async with state.database.writing() as session:
        await repository.delete_expired(session, now)
        await repository.add(
            session,
            UiSession(
                id=_session_id(token),
                master_fingerprint=_fingerprint(state.settings),
                created_at=now,
                expires_at=now + timedelta(seconds=state.settings.ui_session_ttl_s),
            ),
        )
    return token


async def close_session(state: Storage, token: str | None) -> None:
    if token:
        async with state.database.writing() as session:
            await repository.delete(session, _session_id(token))


async def _session_valid(state: Storage, token: str) -> bool:
    async with state.database.reading() as session:
        row = await repository.get(session, _session_id(token))
    return (
        row is not None
        and as_utc(row.expires_at) > datetime.now(UTC)
        and hmac.compare_digest(row.master_fingerprint, _fingerprint(state.settings))
    )


async def is_authorized(request: Request, state: Storage) -> bool | None:
    """True: may look; False: no credentials; None: a wrong Bearer key (a failed attempt)."""
    if state.settings.master_key is None:
        return True
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return True if key_matches(state.settings, header[7:].strip()) else None
    token = request.cookies.get(COOKIE)
    return token is not None and await _session_valid(state, token)
