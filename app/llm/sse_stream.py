"""An OpenAI-compatible upstream's answers that are not a completion: its HTTP errors, and a
stream read as ``data:`` events (app/llm/openai_compat.py sends the requests)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import suppress

import httpx
import orjson

from app.core.errors import UpstreamError
from app.wire.json import JSONObject

__all__ = ["SSEStream", "UpstreamHTTPError", "not_a_stream"]

logger = logging.getLogger(__name__)

# How long to wait for the end of a stream's body after its `[DONE]` before giving the
# connection up instead of returning it to the pool.
_DRAIN_TIMEOUT_S = 1.0


class UpstreamHTTPError(Exception):
    """A non-2xx answer (or an error event in a stream) from an OpenAI-compatible server."""

    def __init__(self, status_code: int, body: object, headers: httpx.Headers | None = None):
        self.status_code = status_code
        self.body: JSONObject = (
            body if isinstance(body, dict) else {"error": {"message": str(body)}}
        )
        self.headers = headers or httpx.Headers()
        inner = self.body.get("error", self.body)
        # {"error": {"message": …}} (OpenAI, vLLM) or {"error": "…"} (Text Generation Inference)
        message = inner.get("message") if isinstance(inner, dict) else inner
        self.message = str(message or f"HTTP {status_code}")
        super().__init__(self.message)

    @property
    def code(self) -> str | None:
        inner = self.body.get("error", self.body)
        code = inner.get("code") if isinstance(inner, dict) else None
        return None if code is None else str(code)


def not_a_stream(
    model: str, response: httpx.Response, content_type: str, content: bytes
) -> Exception:
    """A streamed request answered with something else (a proxy's HTML page, a JSON error
    under status 200): the JSON error as it is, anything else a 502 that says what came."""
    try:
        body: object = orjson.loads(content) if content else None
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict) and "error" in body and "choices" not in body:
        return UpstreamHTTPError(_status_of(body), body, response.headers)
    kind = content_type.split(";", 1)[0].strip()
    return UpstreamError(
        f"The upstream for model '{model}' answered a streamed request "
        f"with HTTP {response.status_code} {kind}, not an event stream.",
        status_code=502,
        code="upstream_not_a_stream",
    )


class SSEStream:
    """The ``data:`` events of an upstream stream as dicts, until ``[DONE]`` or the end."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._events = self._read()
        self.done = False  # the upstream sent [DONE]

    def __aiter__(self) -> SSEStream:
        return self

    async def __anext__(self) -> JSONObject:
        return await self._events.__anext__()

    async def _read(self) -> AsyncGenerator[JSONObject, None]:
        lines = self._response.aiter_lines()
        try:
            async for line in lines:
                if not line.startswith("data:"):
                    continue  # comments (": keep-alive"), event names, blank separators
                payload = line[5:].strip()
                if payload == "[DONE]":
                    self.done = True
                    await self._drain(lines)
                    return
                if not payload:
                    continue
                try:
                    event = orjson.loads(payload)
                except orjson.JSONDecodeError:
                    logger.warning("upstream sent an event that is not JSON; skipped")
                    continue
                if isinstance(event, dict) and "error" in event and "choices" not in event:
                    raise UpstreamHTTPError(_status_of(event), event)
                if isinstance(event, dict):
                    yield event
        finally:
            await self._response.aclose()

    async def _drain(self, lines: AsyncIterator[str]) -> None:
        """Read what follows ``[DONE]`` (the end of the body, normally nothing more) so the
        connection goes back to the pool: closing a response that was not read to its end
        closes the connection, and the next stream would pay a new TCP connection."""
        with suppress(TimeoutError, httpx.HTTPError):
            async with asyncio.timeout(_DRAIN_TIMEOUT_S):
                async for _ in lines:
                    pass

    async def aclose(self) -> None:
        await self._events.aclose()
        await self._response.aclose()


def _status_of(event: JSONObject) -> int:
    """The HTTP status an error event stands for (OpenAI-compatible servers rarely say)."""
    inner = event.get("error")
    if isinstance(inner, dict):
        for key in ("status_code", "code", "status"):
            value = inner.get(key)
            if isinstance(value, int) and 400 <= value < 600:
                return value
        if inner.get("code") == "context_length_exceeded":
            return 400
    return 502
