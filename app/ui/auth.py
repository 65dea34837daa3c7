"""Who may open /ui: anyone when no master key is set; otherwise the master key holder.

The key comes as ``Authorization: Bearer``, once as ``?key=`` (then swapped for a cookie and a
redirect, so it leaves the address bar), or from the login form. The cookie holds an HMAC of
the master key, never the key itself.
"""

from __future__ import annotations

import hashlib
import hmac

from fastapi import Request

from app.core.state import AppState

__all__ = ["COOKIE", "cookie_token", "is_authorized", "key_matches"]

COOKIE = "contextgate_ui"


def cookie_token(master_key: str) -> str:
    return hmac.new(master_key.encode(), b"contextgate-ui-session", hashlib.sha256).hexdigest()


def key_matches(state: AppState, presented: str | None) -> bool:
    master = state.settings.master_key
    if master is None:
        return True
    if not presented:
        return False
    return hmac.compare_digest(presented.encode(), master.get_secret_value().encode())


def is_authorized(request: Request, state: AppState) -> bool:
    master = state.settings.master_key
    if master is None:
        return True
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer ") and key_matches(state, header[7:].strip()):
        return True
    cookie = request.cookies.get(COOKIE)
    return cookie is not None and hmac.compare_digest(
        cookie.encode(), cookie_token(master.get_secret_value()).encode()
    )
