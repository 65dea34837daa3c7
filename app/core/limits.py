"""Input limits: the body size (a pure-ASGI middleware, so streams are untouched). The shape
of a chat request (message, attachment, tool counts): app/protocol/limits.py."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import ErrorRenderer, PayloadTooLarge, renderer_for

__all__ = ["BodySizeLimitMiddleware"]


def _message(limit: int) -> str:
    return f"Request body is larger than the limit of {limit} bytes (CONTEXTGATE_MAX_BODY_BYTES)."


class _TooLarge(HTTPException):
    """Raised from receive(): FastAPI lets an HTTPException from there through unchanged, and
    the error handlers turn it into OpenAI's envelope (413, code payload_too_large)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=_message(limit))


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(_message(limit))


class BodySizeLimitMiddleware:
    """413 when Content-Length, or the bytes actually received, exceed ``max_bytes``."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int = 32 * 1024 * 1024,
        renderers: Mapping[str, ErrorRenderer] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.renderers = dict(renderers or {})  # a door's envelope by path prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._refuse(scope, receive, send)
                    return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        render = renderer_for(scope.get("path", ""), self.renderers)
        await render(_too_large(self.max_bytes))(scope, receive, send)
