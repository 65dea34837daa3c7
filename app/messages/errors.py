"""Anthropic's error envelope: ``{"type": "error", "error": {"type", "message"}}``.

Anthropic names the error by status (``invalid_request_error`` for 400, ``authentication_error``
for 401, …); the Anthropic SDK picks its exception class from the status and shows the message.
Errors found while streaming are an ``event: error`` with the same body.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response

from app.core.errors import ContextGateError
from app.messages.types import AnthropicErrorBody

__all__ = ["anthropic_error_body", "anthropic_error_response", "anthropic_error_type"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error_type(status: int) -> str:
    if status in _TYPES:
        return _TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def anthropic_error_body(error: ContextGateError) -> AnthropicErrorBody:
    return {
        "type": "error",
        "error": {"type": anthropic_error_type(error.status_code), "message": error.message},
    }


def anthropic_error_response(error: ContextGateError) -> Response:
    return Response(
        orjson.dumps(anthropic_error_body(error)),
        status_code=error.status_code,
        media_type="application/json",
        headers=error.headers,
    )
