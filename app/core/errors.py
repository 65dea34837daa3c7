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
    └── UpstreamError                   502/503/504 and pass-through statuses from the provider
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

__all__ = [
    "BadRequest",
    "Conflict",
    "ContextGateError",
    "ContextLengthExceeded",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "Unauthorized",
    "UnsupportedMediaType",
    "UpstreamError",
    "error_body",
    "error_response",
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


class UpstreamError(ContextGateError):
    status_code = 502
    error_type = "upstream_error"


def error_body(
    message: str, error_type: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def error_response(exc: ContextGateError) -> Response:
    body = error_body(exc.message, exc.error_type, exc.code, exc.param)
    return Response(
        orjson.dumps(body),
        status_code=exc.status_code,
        media_type="application/json",
        headers=exc.headers,
    )


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    errors = exc.errors()
    if not errors:
        return "Invalid request body.", None
    first = errors[0]
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(loc) or None
    msg = str(first.get("msg", "invalid value"))
    if first.get("type") == "json_invalid":
        return "Request body is not valid JSON.", None
    where = f" at '{param}'" if param else ""
    extra = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"Invalid request{where}: {msg}{extra}", param


_STATUS_TYPES = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "forbidden"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "payload_too_large"),
}


def install_error_handlers(app: FastAPI) -> None:
    async def on_contextgate_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ContextGateError)
        return error_response(exc)

    async def on_validation_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        message, param = _validation_message(exc)
        return error_response(BadRequest(message, param=param, code="invalid_request"))

    async def on_http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        error_type, code = _STATUS_TYPES.get(exc.status_code, ("invalid_request_error", None))
        return error_response(
            ContextGateError(
                str(exc.detail),
                status_code=exc.status_code,
                error_type=error_type,
                code=code,
                headers=dict(exc.headers or {}),
            )
        )

    async def on_unexpected_error(request: Request, exc: Exception) -> Response:
        # A bug, not a client error: still OpenAI's envelope, never a plain-text 500.
        request_id = getattr(request.state, "request_id", None)
        logger.error("unhandled error", exc_info=exc, extra={"request_id": request_id})
        suffix = f" (request id {request_id})" if request_id else ""
        return error_response(
            ContextGateError(
                f"The server failed to handle the request{suffix}.", code="internal_error"
            )
        )

    app.add_exception_handler(Exception, on_unexpected_error)
    app.add_exception_handler(ContextGateError, on_contextgate_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
