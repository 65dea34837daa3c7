"""Map provider errors (as litellm or the direct path raise them) to OpenAI-shaped errors.

litellm and the openai SDK are looked up in ``sys.modules`` rather than imported: an exception
can only be one of theirs once they are loaded, and a process that only talks to
OpenAI-compatible servers never loads them (app/llm/openai_compat.py).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import cast

import httpx
import orjson

from app.core.errors import (
    BadRequest,
    ContextGateError,
    ContextLengthExceeded,
    NotFound,
    RateLimited,
    UpstreamError,
)
from app.core.redact import redact

__all__ = ["is_retryable", "map_upstream_error", "redact_error", "retry_after_seconds"]

_BROKEN_STREAM = (httpx.ReadError, httpx.RemoteProtocolError)
_CONTEXT_CODES = frozenset({"context_length_exceeded", "context_window_exceeded"})


def _loaded(module: str, name: str) -> tuple[type[BaseException], ...]:
    """``module.name`` if that module is already imported, else nothing to match."""
    loaded = sys.modules.get(module)
    kind = getattr(loaded, name, None) if loaded is not None else None
    return (kind,) if isinstance(kind, type) and issubclass(kind, BaseException) else ()


def _connection_errors() -> tuple[type[BaseException], ...]:
    return (*_loaded("openai", "APIConnectionError"), httpx.ConnectError, ConnectionError)


def _timeouts() -> tuple[type[BaseException], ...]:
    return (*_loaded("openai", "APITimeoutError"), httpx.TimeoutException, TimeoutError)


# What OpenAI-compatible servers say when the prompt does not fit (OpenAI, vLLM, llama.cpp…).
_CONTEXT_MESSAGE = re.compile(
    r"maximum context length|context length exceeded|context window|prompt is too long"
    r"|exceeds the (available )?context|too many tokens|longer than the model's context length"
    r"|`inputs` tokens \+ `max_new_tokens` must be|exceed_context_size",
    re.IGNORECASE,
)


def _is_context_overflow(exc: BaseException, status: object, message: str) -> bool:
    if isinstance(exc, _loaded("litellm.exceptions", "ContextWindowExceededError")):
        return True
    if status not in (400, 413, 422):
        return False
    if _upstream_code(exc) in _CONTEXT_CODES or _CONTEXT_MESSAGE.search(message):
        return True
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    return isinstance(inner, dict) and bool(_CONTEXT_MESSAGE.search(str(inner.get("type", ""))))


_PREFIX = re.compile(r"^(litellm\.\w+:\s*)+|^\w+Exception\s*-\s*")


def _clean_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
    message = str(getattr(exc, "message", None) or exc)
    for _ in range(3):
        message = _PREFIX.sub("", message).strip()
    return _json_error_message(message) or message or exc.__class__.__name__


def _json_error_message(message: str) -> str | None:
    """The provider's own message when litellm passes its JSON error body on as the text
    (Anthropic's ``{"type": "error", "error": {"type", "message"}}``, OpenAI's ``{"error"}``)."""
    if not message.startswith("{"):
        return None
    try:
        body = orjson.loads(message)
    except orjson.JSONDecodeError:
        return None
    inner = body.get("error") if isinstance(body, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    return None


def _response_headers(exc: BaseException) -> object:
    # litellm keeps the provider's headers apart; its `response` is a stub without them.
    headers = getattr(exc, "litellm_response_headers", None) or getattr(exc, "headers", None)
    if headers:
        return headers
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None) or {}


def retry_after_seconds(exc: BaseException) -> float | None:
    """Retry-After (seconds or an HTTP date) or retry-after-ms of the failed response."""
    found = _response_headers(exc)
    if not hasattr(found, "get"):
        return None
    headers = cast("Mapping[str, str]", found)  # httpx.Headers, or a dict of them
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


def map_upstream_error(exc: BaseException, model: str) -> ContextGateError:
    """One place that decides what a client sees when the upstream fails; every secret in the
    upstream's text is masked here, before the client, the request log or a log sees it."""
    return redact_error(_map(exc, model))


def redact_error(error: ContextGateError) -> ContextGateError:
    """``error`` with every string a client, a log or a stored record may see masked: the
    message, and the code, param and type (an upstream may echo the key in any of them, e.g.
    its Authorization header in ``code``), and the header values."""
    message = redact(error.message)
    if message != error.message:
        error.message = message
        error.args = (message,)
    if error.code is not None:
        error.code = redact(error.code)
    if error.param is not None:
        error.param = redact(error.param)
    error.error_type = redact(error.error_type)
    error.headers = {name: redact(value) for name, value in error.headers.items()}
    return error


def _map(exc: BaseException, model: str) -> ContextGateError:
    if isinstance(exc, ContextGateError):
        return exc
    message = _clean_message(exc)
    timeouts = (*_loaded("litellm.exceptions", "Timeout"), *_timeouts(), asyncio.TimeoutError)
    if isinstance(exc, timeouts):
        return UpstreamError(
            f"The upstream for model '{model}' did not answer in time.",
            status_code=504,
            error_type="timeout",
            code="upstream_timeout",
        )
    status = getattr(exc, "status_code", None)
    if _is_context_overflow(exc, status, message):
        return ContextLengthExceeded(message)
    if status in (None, 500) and _is_connection_failure(exc):
        return UpstreamError(
            f"Could not reach the upstream for model '{model}': {message}",
            status_code=502,
            code="upstream_unreachable",
        )
    if (status is None or status >= 500) and _in_chain(exc, _BROKEN_STREAM):
        # litellm labels a connection that broke off mid-answer "HTTP 500"/503; it was not.
        return UpstreamError(
            f"The upstream for model '{model}' broke off its answer: {message}",
            status_code=502,
            code="upstream_error",
        )
    if status == 429:
        retry_after = retry_after_seconds(exc)
        headers = {"Retry-After": str(int(retry_after + 0.999))} if retry_after is not None else {}
        return RateLimited(f"The upstream rate-limited the request: {message}", headers=headers)
    if status in (None, 500) and "missing credentials" in message.lower():
        # litellm raises this before any call when no provider key is configured.
        return UpstreamError(
            f"contextgate has no credentials for model '{model}': set the provider's key "
            "(e.g. OPENAI_API_KEY), CONTEXTGATE_UPSTREAM_BASE_URL/CONTEXTGATE_UPSTREAM_API_KEY, "
            f"or an api_key in CONTEXTGATE_CONFIG. ({message})",
            status_code=502,
            code="upstream_credentials_missing",
        )
    if status in (401, 403):
        return UpstreamError(
            f"The upstream refused contextgate's credentials for model '{model}' "
            f"(HTTP {status}): {message}",
            status_code=502,
            code="upstream_auth_failed",
        )
    if status == 404 or (status == 400 and "LLM Provider NOT provided" in message):
        # An unknown name: the upstream's 404, or litellm finding no provider for it.
        return NotFound(message.split("\n", 1)[0], code="model_not_found", param="model")
    if status in (400, 422):
        return BadRequest(message, code=_upstream_code(exc))
    return UpstreamError(
        f"The upstream for model '{model}' failed"
        + (f" (HTTP {status})" if status else "")
        + f": {message}",
        status_code=502,
        code="upstream_error",
    )


def _in_chain(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, kinds):
            return True
        current = current.__cause__ or current.__context__
    return False


def _is_connection_failure(exc: BaseException) -> bool:
    """Whether the upstream could not be reached at all.

    litellm reports a refused connection as ``InternalServerError("Connection error.")`` with
    status 500; the cause chain still holds openai's ``APIConnectionError`` / httpx's
    ``ConnectError`` / the OS error, which tell it apart from a real HTTP 500.
    """
    connection_errors, timeouts = _connection_errors(), _timeouts()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, connection_errors) and not isinstance(current, timeouts):
            return True
        current = current.__cause__ or current.__context__
    return False


def _upstream_code(exc: BaseException) -> str | None:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("code") is not None:
            return str(inner["code"])
    return None


def is_retryable(error: ContextGateError) -> bool:
    """429, 5xx and connection errors are worth another try; timeouts and 4xx are not."""
    if error.status_code == 429:
        return True
    return error.status_code == 502 and error.code in ("upstream_unreachable", "upstream_error")
