"""Errors in OpenAI's envelope: ``{"error": {"message", "type", "param", "code"}}``.

Hierarchy::

    ContextGateError                    base: message, status_code, type, code, param, headers
    ├── BadRequest                      400 invalid_request_error
    │   └── ContextLengthExceeded       400 code=context_length_exceeded
    ├── Unauthorized                    401 invalid_api_key
    ├── NotFound                        404 not_found
    ├── Conflict                        409
    ├── PayloadTooLarge                 413
    ├── UnsupportedMediaType            415
    ├── RateLimited                     429 (Retry-After when known)
    ├── DatabaseUnavailable             503 database_unavailable (Retry-After): retry later
    └── UpstreamError                   502/503/504 and pass-through statuses from the provider
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.allow import allowed_methods
from app.core.validation import validation_message
from app.wire.errors import ErrorBody

__all__ = [
    "BadRequest",
    "Conflict",
    "ContextGateError",
    "ContextLengthExceeded",
    "DatabaseUnavailable",
    "ErrorRenderer",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "Unauthorized",
    "UnsupportedMediaType",
    "UpstreamError",
    "error_body",
    "error_response",
    "renderer_for",
    "install_error_handlers",
]

logger = logging.getLogger(__name__)


class ContextGateError(Exception):
    status_code: int = 500
    error_type: str = "server_error"
    default_code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        param: str | None = None,
        error_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code
        if error_type is not None:
            self.error_type = error_type
        self.code = code if code is not None else self.default_code
        self.param = param
        self.headers = headers or {}


class BadRequest(ContextGateError):
    status_code = 400
    error_type = "invalid_request_error"


class ContextLengthExceeded(BadRequest):
    default_code = "context_length_exceeded"


class Unauthorized(ContextGateError):
    status_code = 401
    error_type = "invalid_request_error"
    default_code = "invalid_api_key"


class NotFound(ContextGateError):
    status_code = 404
    error_type = "invalid_request_error"
    default_code = "not_found"


class Conflict(ContextGateError):
    status_code = 409
    error_type = "invalid_request_error"
    default_code = "conflict"


class PayloadTooLarge(ContextGateError):
    status_code = 413
    error_type = "invalid_request_error"
    default_code = "payload_too_large"


class UnsupportedMediaType(ContextGateError):
    status_code = 415
    error_type = "invalid_request_error"
    default_code = "unsupported_media_type"


class RateLimited(ContextGateError):
    status_code = 429
    error_type = "rate_limit_error"
    default_code = "rate_limit_exceeded"


class DatabaseUnavailable(ContextGateError):
    """The database cannot be reached (down, restarting, refusing connections, pool exhausted):
    nothing was stored; the client may retry."""

    status_code = 503
    error_type = "server_error"
    default_code = "database_unavailable"

    def __init__(self, message: str = "The database is unavailable; retry shortly.") -> None:
        super().__init__(message, headers={"Retry-After": "1"})


class UpstreamError(ContextGateError):
    status_code = 502
    error_type = "upstream_error"


def error_body(
    message: str, error_type: str, code: str | None = None, param: str | None = None
) -> ErrorBody:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


ErrorRenderer = Callable[[ContextGateError], Response]
"""Renders an error in one door's envelope (OpenAI's by default)."""


def error_response(exc: ContextGateError) -> Response:
    body = error_body(exc.message, exc.error_type, exc.code, exc.param)
    return Response(
        orjson.dumps(body),
        status_code=exc.status_code,
        media_type="application/json",
        headers=exc.headers,
    )


_STATUS_TYPES = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "forbidden"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "payload_too_large"),
}


def renderer_for(path: str, renderers: Mapping[str, ErrorRenderer]) -> ErrorRenderer:
    """The renderer of the longest prefix that ``path`` is (or lies under); OpenAI's else."""
    best = -1
    chosen_renderer: ErrorRenderer = error_response
    for prefix, renderer in renderers.items():
        if (path == prefix or path.startswith(prefix.rstrip("/") + "/")) and len(prefix) > best:
            best, chosen_renderer = len(prefix), renderer
    return chosen_renderer


def _unknown_endpoint(request: Request) -> str:
    """A 404 under /v1 names what is served, so a client probing an endpoint learns where to go."""
    paths = request.app.openapi().get("paths", {})  # built once, then cached by FastAPI
    endpoints = ", ".join(
        f"{'/'.join(method.upper() for method in sorted(methods))} {path}"
        for path, methods in sorted(paths.items())
        if path.startswith("/v1/")
    )
    return f"Unknown endpoint {request.method} {request.url.path}. contextgate serves: {endpoints}."


class UnexpectedErrorMiddleware:
    """Answers an exception no handler took (a bug) with the 500 of the door's envelope, here.

    Starlette's own last resort sends that answer and then re-raises, and uvicorn closes the
    connection of any request whose exception escapes: the client's next request on the same
    keep-alive connection would be reset. An exception after the answer started (a stream
    broken off) still escapes: closing that connection is then the right thing."""

    def __init__(
        self, app: ASGIApp, handler: Callable[[Request, Exception], Awaitable[Response]]
    ) -> None:
        self.app = app
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if started:
                raise
            response = await self.handler(Request(scope), exc)
            await response(scope, receive, send)


def install_error_handlers(
    app: FastAPI, renderers: Mapping[str, ErrorRenderer] | None = None
) -> None:
    """Every error in one envelope: a door's own (``renderers``, by path prefix, e.g.
    ``{"/v1/messages": anthropic_error_response}``), OpenAI's everywhere else."""
    by_prefix = dict(renderers or {})

    def render(request: Request, exc: ContextGateError) -> Response:
        return renderer_for(request.url.path, by_prefix)(exc)

    async def on_contextgate_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ContextGateError)
        return render(request, exc)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        message, param = validation_message(exc.errors())
        return render(request, BadRequest(message, param=param, code="invalid_request"))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        inner = getattr(exc, "error", None)  # app.core.textcheck.RequestRejected
        if isinstance(inner, ContextGateError):
            return render(request, inner)
        error_type, code = _STATUS_TYPES.get(exc.status_code, ("invalid_request_error", None))
        message, headers = str(exc.detail), dict(exc.headers or {})
        if exc.status_code == 405:
            allowed = allowed_methods(request.app, request.url.path) or [headers.get("Allow", "")]
            headers["Allow"] = ", ".join(allowed)
            message = f"{request.method} is not allowed here; allowed: {headers['Allow']}."
        if exc.status_code == 404 and request.url.path.startswith("/v1/"):
            message = _unknown_endpoint(request)
        return render(
            request,
            ContextGateError(
                message,
                status_code=exc.status_code,
                error_type=error_type,
                code=code,
                headers=headers,
            ),
        )

    async def on_unexpected_error(request: Request, exc: Exception) -> Response:
        # A bug, not a client error: still the door's envelope, never a plain-text 500.
        request_id = getattr(request.state, "request_id", None)
        logger.error("unhandled error", exc_info=exc, extra={"request_id": request_id})
        suffix = f" (request id {request_id})" if request_id else ""
        return render(
            request,
            ContextGateError(
                f"The server failed to handle the request{suffix}.", code="internal_error"
            ),
        )

    async def on_pool_timeout(request: Request, exc: Exception) -> Response:
        # every pooled connection stayed busy for the pool's timeout: overloaded, not broken
        logger.warning("database pool exhausted", extra={"error": str(exc)[:200]})
        busy = DatabaseUnavailable("Every database connection is busy; retry shortly.")
        return render(request, busy)

    app.add_exception_handler(Exception, on_unexpected_error)
    # Added first, so innermost: an unexpected error is answered inside the app and never
    # reaches the server, which would close the client's keep-alive connection over it.
    app.add_middleware(UnexpectedErrorMiddleware, handler=on_unexpected_error)
    app.add_exception_handler(PoolTimeout, on_pool_timeout)
    app.add_exception_handler(ContextGateError, on_contextgate_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
