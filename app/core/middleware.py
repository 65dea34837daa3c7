"""Request id and timing, as a plain ASGI middleware (it does not break streaming)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import metrics
from app.core.ids import new_id
from app.core.logging import request_id_var

__all__ = ["RequestContextMiddleware"]


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_id("req")
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        state["started"] = time.perf_counter()
        token = request_id_var.set(request_id)
        status = 500  # what the client sees when the app raises before answering

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)
            # After the last byte (a whole SSE stream included); the router has set the route.
            metrics.record_http(
                scope["method"],
                _route_template(scope),
                status,
                time.perf_counter() - state["started"],
            )


def _route_template(scope: Scope) -> str:
    """``/v1/conversations/{conversation_id}``, not the raw path: bounded label values."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    # A mounted app (the inspector's static files): Starlette leaves no route in the scope,
    # only the mount's prefix as root_path (and app_root_path, which marks a mount).
    mount = scope.get("root_path")
    if "app_root_path" in scope and isinstance(mount, str) and mount:
        return f"{mount}/{{path}}"
    return "unmatched"
