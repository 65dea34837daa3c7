"""/openapi.json as the API answers: errors are declared in their envelope, with the statuses
contextgate gives. FastAPI declares a 422 for every operation with input, but a request that
fails validation answers 400 (OpenAI's convention); that 400 is declared instead, along with
401/429 on authenticated routes, 403 on key management, 404 on routes with an id, 413 on
bodies, and a ``default`` for the rest (409, upstream failures), all in the error envelope.
Routes under ``/v1/messages`` answer in Anthropic's envelope and are declared so.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.wire.json import JSONObject

__all__ = ["install_openapi"]

_OPENAI_ERROR = {
    "title": "ErrorResponse",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
_ANTHROPIC_ERROR = {
    "title": "AnthropicErrorResponse",
    "type": "object",
    "required": ["type", "error"],
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
_DESCRIPTIONS = {
    "400": "Bad request: invalid JSON, a field that fails validation, an unknown model.",
    "401": "No key, a wrong key, or an expired key.",
    "403": "Only the master key may do this.",
    "404": "No such id for this caller (another tenant's ids are 404 too).",
    "413": "The body, a message or an attachment is too large, or a storage quota is full.",
    "429": "Rate limited (rpm, budget, quota, failed-auth throttling); Retry-After when known.",
    "default": "Any other error (409 Idempotency-Key in use, 502/503/504 upstream failures).",
}


def _error_statuses(path: str, method: str, operation: JSONObject) -> list[str]:
    statuses = ["default"]
    has_input = bool(operation.get("parameters")) or "requestBody" in operation
    if has_input or "422" in operation.get("responses", {}):
        statuses.append("400")
    if path.startswith("/v1"):
        statuses += ["401", "429"]
    if path.startswith("/v1/keys"):
        statuses.append("403")
    if "{" in path:
        statuses.append("404")
    if method in ("post", "put", "patch"):
        statuses.append("413")
    return statuses


def _declare_errors(document: JSONObject) -> None:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas["ErrorResponse"] = _OPENAI_ERROR
    schemas["AnthropicErrorResponse"] = _ANTHROPIC_ERROR
    for path, item in document.get("paths", {}).items():
        envelope = "AnthropicErrorResponse" if path.startswith("/v1/messages") else "ErrorResponse"
        content = {"application/json": {"schema": {"$ref": f"#/components/schemas/{envelope}"}}}
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for status in _error_statuses(path, method, operation):
                responses.setdefault(status, {"description": _DESCRIPTIONS[status]})
                responses[status]["content"] = content
            responses.pop("422", None)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)


def install_openapi(app: FastAPI) -> None:
    def openapi() -> JSONObject:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            _declare_errors(document)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
