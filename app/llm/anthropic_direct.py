"""The direct path to Anthropic's Messages API: litellm's translation without litellm.

A deployment that is ``anthropic/<model>`` with an ``api_base`` and an ``api_key`` (Claude
Code's, through the Messages door) was reached through ``litellm.acompletion``: its chat ->
Messages translation, its wrappers and its response objects cost as much server CPU per agent
call as the rest of contextgate together (bench/README.md has the figures). This path sends the
body litellm would send (anthropic_direct_request.py) over the OpenAI-compatible path's pooled
connections and reads the answer into the completion or the stream chunks litellm would give
(anthropic_direct_response.py); tests/llm/test_anthropic_direct.py proves both the same
against the fake Anthropic API. A request it does not cover (``Unsupported``) goes through
litellm, as does every call with ``CONTEXTGATE_UPSTREAM_TRANSPORT=litellm``.

Failures raise :class:`UpstreamHTTPError` with Anthropic's error body, which
``app.llm.errors.map_upstream_error`` maps as it maps litellm's ``AnthropicException``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import suppress
from typing import Any, cast

import httpx
import orjson

from app import __version__
from app.llm.anthropic_direct_request import (
    Unsupported,
    anthropic_body,
    beta_header,
    model_supported,
)
from app.llm.anthropic_direct_response import AnthropicChunks, chat_completion
from app.llm.openai_compat import OpenAICompatTransport
from app.llm.params import strip_control_params
from app.llm.routing import Deployment
from app.llm.sse_stream import UpstreamHTTPError
from app.wire.json import JSONObject

__all__ = ["AnthropicTransport", "Unsupported", "is_direct_anthropic"]

# Deployment parameters this path understands; any other sends the deployment through litellm.
_PARAMS = frozenset({"api_base", "api_key", "timeout"})
_PREFIX = "anthropic/"
_VERSION = "2023-06-01"  # what litellm sends, whatever the client's anthropic-version
_DRAIN_TIMEOUT_S = 1.0  # how long the end of a stream's body may take after message_stop


def is_direct_anthropic(deployment: Deployment) -> bool:
    """Whether ``deployment`` is an Anthropic Messages API this module can call as litellm
    would: ``anthropic/<model>`` with its api_base and key, a model whose translation is the
    plain one, and litellm's bundled beta-header table in use (contextgate's default)."""
    params = deployment.params
    return (
        deployment.litellm_model.startswith(_PREFIX)
        and isinstance(params.get("api_base"), str)
        and bool(params.get("api_base"))
        and isinstance(params.get("api_key"), str)
        and bool(params["api_key"])
        and params["api_key"] == str(params["api_key"]).strip()
        and _PARAMS.issuperset(params)
        and os.environ.get("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "").lower() == "true"
        and not os.environ.get("LITELLM_ANTHROPIC_DISABLE_URL_SUFFIX")
        and model_supported(deployment.litellm_model.removeprefix(_PREFIX))
    )


def _url(deployment: Deployment) -> str:
    base = str(deployment.params["api_base"])  # as litellm appends it: no slash stripped
    return base if base.endswith("/v1/messages") else base + "/v1/messages"


# The statuses litellm's Anthropic errors carry instead of Anthropic's own: a request too
# large is its BadRequestError (400), "overloaded" (529) its InternalServerError (500).
_LITELLM_STATUS = {413: 400, 529: 500}


async def _events(response: httpx.Response) -> AsyncIterator[JSONObject]:
    """The ``data:`` events of Anthropic's stream as dicts, until ``message_stop`` (after which
    the body's end is read, so the connection goes back to the pool); the response closed."""
    lines = response.aiter_lines()
    try:
        async for line in lines:
            if not line.startswith("data:"):
                continue  # event names, pings' blank separators
            payload = line[5:].strip()
            if not payload:
                continue
            event = orjson.loads(payload)
            if not isinstance(event, dict):
                continue
            if event.get("type") == "message_stop":
                with suppress(TimeoutError, httpx.HTTPError):
                    async with asyncio.timeout(_DRAIN_TIMEOUT_S):
                        async for _ in lines:
                            pass
            yield event
    finally:
        await response.aclose()


class AnthropicTransport:
    """POSTs Messages bodies over ``pool``'s connections (the OpenAI-compatible path's)."""

    def __init__(self, pool: OpenAICompatTransport) -> None:
        self._pool = pool

    def request(
        self,
        deployment: Deployment,
        messages: Sequence[Mapping[str, object]],
        params: Mapping[str, object],
        headers: Mapping[str, str] | None,
        timeout: httpx.Timeout,
        *,
        stream: bool,
    ) -> httpx.Request:
        """The request litellm would send; :class:`Unsupported` when it would send another."""
        model = deployment.litellm_model.removeprefix(_PREFIX)
        body = anthropic_body(
            model,
            cast("Sequence[Mapping[str, Any]]", messages),
            strip_control_params(params),
        )
        if stream:
            body["stream"] = True
        sent = {
            "accept-encoding": "gzip, deflate",
            "connection": "keep-alive",
            "user-agent": f"contextgate/{__version__}",
            "anthropic-version": _VERSION,
            "accept": "application/json",
            "content-type": "application/json",
            "x-api-key": str(deployment.params["api_key"]),
        }
        beta = beta_header((headers or {}).get("anthropic-beta"))
        if beta is not None:
            sent["anthropic-beta"] = beta
        return httpx.Request(
            "POST",
            _url(deployment),
            content=orjson.dumps(body),
            headers=sent,
            extensions={"timeout": timeout.as_dict()},
        )

    async def complete(self, deployment: Deployment, request: httpx.Request) -> JSONObject:
        """litellm's chat completion of the answer (normalized by the caller)."""
        data, status = await self._pool.send_for_json(request, _LITELLM_STATUS)
        if not isinstance(data, dict) or data.get("type") != "message":
            raise UpstreamHTTPError(
                status if isinstance(data, dict) and "error" in data else 502,
                data if isinstance(data, dict) else str(data)[:2000],
            )
        return chat_completion(data)

    async def open_stream(self, deployment: Deployment, request: httpx.Request) -> AnthropicChunks:
        response = await self._pool.send_for_events(request, deployment.model_name, _LITELLM_STATUS)
        return AnthropicChunks(_events(response))
