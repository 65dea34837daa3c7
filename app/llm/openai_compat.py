"""The direct path to OpenAI-compatible servers: one connection pool, no SDK in between.

A deployment that is ``openai/<model>`` with its own ``api_base`` (vLLM, Ollama, llama.cpp, a
gateway, ``CONTEXTGATE_UPSTREAM_BASE_URL``) already speaks the wire format contextgate speaks;
litellm's translation for it is the identity. Sending such calls through
``litellm.acompletion`` costs 6–7 ms of CPU per call (its wrappers, the OpenAI SDK's request and
response models) and ~160 MiB of imports; this module sends the same JSON body over one shared
httpx connection pool instead (bench/README.md has the figures). Every other provider, and any
deployment with parameters this path does not know, still goes through litellm;
``CONTEXTGATE_UPSTREAM_TRANSPORT=litellm`` sends everything through litellm.

Failures raise :class:`UpstreamHTTPError` (or httpx's own errors), which
``app.llm.errors.map_upstream_error`` maps exactly as it maps litellm's.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import httpx
import orjson

from app import __version__
from app.llm.http1 import HEAD, HTTP1Transport, read_response, request_head
from app.llm.params import strip_control_params
from app.llm.routing import Deployment
from app.llm.sse_stream import SSEStream, UpstreamHTTPError, not_a_stream
from app.wire.json import JSONObject

__all__ = ["OpenAICompatTransport", "UpstreamHTTPError", "is_direct"]

logger = logging.getLogger(__name__)

# Deployment parameters this path understands; any other makes the deployment go through
# litellm, which knows what e.g. `drop_params` or `rpm` mean.
_TRANSPORT_PARAMS = frozenset({"api_base", "api_key", "organization", "timeout", "extra_headers"})


def is_direct(deployment: Deployment) -> bool:
    """Whether ``deployment`` is a plain OpenAI-compatible server this module can call."""
    return (
        deployment.litellm_model.startswith("openai/")
        and bool(deployment.params.get("api_base"))
        and _TRANSPORT_PARAMS.issuperset(deployment.params)
    )


def error_from(
    response: httpx.Response, content: bytes, statuses: Mapping[int, int] | None = None
) -> UpstreamHTTPError:
    """The upstream's error response as ``UpstreamHTTPError``; ``statuses``: a status to
    report as another (as litellm does for a provider)."""
    try:
        body: object = orjson.loads(content) if content else None
    except orjson.JSONDecodeError:
        body = content.decode("utf-8", "replace")[:2000]
    status = (statuses or {}).get(response.status_code, response.status_code)
    return UpstreamHTTPError(status, body or response.reason_phrase or "no body", response.headers)


_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json",
    "accept-encoding": "gzip, deflate",
    "connection": "keep-alive",
    "user-agent": f"contextgate/{__version__}",
}


def _headers(deployment: Deployment) -> httpx.Headers:
    headers = httpx.Headers(_HEADERS)
    api_key = deployment.params.get("api_key")
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    organization = deployment.params.get("organization")
    if organization:
        headers["openai-organization"] = str(organization)
    # Configured headers win, whatever their case (an `Authorization` replaces the key's).
    headers.update(cast("Mapping[str, str]", deployment.params.get("extra_headers") or {}))
    return headers


def _url(deployment: Deployment, path: str) -> str:
    return str(deployment.params["api_base"]).rstrip("/") + path


# Distinct (api_base, key, organization, headers) kept by one transport: a bound on what a
# router that makes up deployments could make it hold.
_TARGETS_MAX = 256
_MISSING = object()
_NO_HEADERS: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class _Target:
    """A request's URL and headers but its Content-Length, as ``httpx.Request`` makes them
    from ``content=``: Host first (unless configured), Content-Length last. Parsing the URL
    and normalizing the headers on every call cost more than the rest of building it; so did
    the pool's writing them out (``head``: the request line and those headers, or None if
    the pool cannot send them)."""

    url: httpx.URL
    headers: httpx.Headers
    head: bytes | None

    @classmethod
    def of(cls, deployment: Deployment, path: str) -> _Target | None:
        url = httpx.URL(_url(deployment, path))
        headers = _headers(deployment)
        if "Content-Length" in headers or "Transfer-Encoding" in headers:
            return None  # framing configured by hand: httpx.Request decides, per call
        if "Host" not in headers and url.host:
            headers = httpx.Headers([(b"Host", url.netloc), *headers.raw])
        try:
            head: bytes | None = request_head("POST", url, headers)
        except httpx.LocalProtocolError:
            head = None  # the pool raises it per call, as it did
        return cls(url, headers, head)


KEEPALIVE_EXPIRY_S = 4.0


class OpenAICompatTransport:
    """POSTs ``/chat/completions`` bodies; one connection pool for every deployment."""

    def __init__(self, *, max_connections: int = 1000) -> None:
        limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            # below the 5 s idle timeout of common servers (uvicorn, Node): a connection the
            # server is closing just then is not reused (a request written to it is lost)
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        )
        # HTTP/1.1 on asyncio and httptools, not httpcore and h11 (http1.py has the why).
        self._pool = HTTP1Transport(limits=limits)
        # Proxies from the environment are the SDK's default too: with any set, requests go
        # through an httpx client that routes them (NO_PROXY included; it routes only with
        # its own transports). Without, straight to the pool: the client's layers (cookie
        # jar, redirects, auth, event hooks) cost ~4 % of the server's CPU per request.
        # Requests are built here, never by a client, so no cookie a client kept from one
        # tenant's call goes out with another's.
        self._client: httpx.AsyncClient | None = None
        if urllib.request.getproxies():
            self._client = httpx.AsyncClient(limits=limits, follow_redirects=False)
        self._targets: dict[tuple[object, ...], _Target | None] = {}

    async def aclose(self) -> None:
        await self._pool.aclose()
        if self._client is not None:
            await self._client.aclose()

    async def send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        """The response, its body read unless ``stream`` (then the caller closes it)."""
        if self._client is not None:
            return await self._client.send(request, stream=stream)
        response = await self._pool.handle_async_request(request)
        response.request = request
        if not stream:
            await read_response(response)
        return response

    def _request(
        self,
        deployment: Deployment,
        messages: Sequence[Mapping[str, object]],
        params: Mapping[str, object],
        timeout: httpx.Timeout,
        *,
        stream: bool,
    ) -> httpx.Request:
        body = strip_control_params(params)
        body["model"] = deployment.litellm_model.removeprefix("openai/")
        body["messages"] = messages
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        else:
            body.pop("stream", None)
            body.pop("stream_options", None)
        return self._post(deployment, "/chat/completions", body, timeout)

    def _post(
        self, deployment: Deployment, path: str, body: JSONObject, timeout: httpx.Timeout
    ) -> httpx.Request:
        content = orjson.dumps(body)
        extensions = {"timeout": timeout.as_dict()}
        target = self._target(deployment, path)
        if target is None:
            return httpx.Request(
                "POST",
                _url(deployment, path),
                content=content,
                headers=_headers(deployment),
                extensions=extensions,
            )
        length = b"%d" % len(content)
        request = httpx.Request(
            "POST",
            target.url,
            headers=target.headers,  # copied
            stream=httpx.ByteStream(content),
            extensions=extensions,
        )
        # Content-Length last, as ``headers["Content-Length"] = ...`` appends it (none before).
        request.headers._list.append((b"Content-Length", b"content-length", length))
        request._content = content  # what ``request.read()`` sets from a ByteStream
        if target.head is not None and self._client is None:
            request.extensions[HEAD] = b"%sContent-Length: %s\r\n\r\n" % (target.head, length)
        return request

    def _target(self, deployment: Deployment, path: str) -> _Target | None:
        """The URL and headers of ``path`` on the deployment, built once per distinct
        api_base, key, organization and configured headers (deployments made per request
        for ``CONTEXTGATE_UPSTREAM_BASE_URL`` share theirs); None: built per call."""
        params = deployment.params
        extra = params.get("extra_headers") or _NO_HEADERS
        if type(extra) is not dict and not isinstance(extra, Mapping):
            return None
        api_base = params.get("api_base")
        api_key = params.get("api_key")
        organization = params.get("organization")
        headers = tuple(extra.items()) if extra else ()
        # Strings only, as a config gives them: with 1 == True == 1.0, other values could make
        # two different sets of headers one key.
        if not (
            (type(api_base) is str or api_base is None)
            and (type(api_key) is str or api_key is None)
            and (type(organization) is str or organization is None)
            and (not headers or all(type(n) is str and type(v) is str for n, v in headers))
        ):
            return None
        key = (path, api_base, api_key, organization, headers)
        target = self._targets.get(key, _MISSING)
        if target is _MISSING:
            if len(self._targets) >= _TARGETS_MAX:
                self._targets.clear()
            target = self._targets[key] = _Target.of(deployment, path)
        return cast("_Target | None", target)

    async def complete(
        self,
        deployment: Deployment,
        messages: Sequence[Mapping[str, object]],
        params: Mapping[str, object],
        timeout: httpx.Timeout,
    ) -> JSONObject:
        """The upstream's ``chat.completion`` as it sent it (normalized by the caller)."""
        request = self._request(deployment, messages, params, timeout, stream=False)
        data, _ = await self.send_for_json(request)
        if not isinstance(data, dict) or "choices" not in data:
            raise UpstreamHTTPError(502, data if isinstance(data, dict) else str(data)[:2000])
        return data

    async def send_for_json(
        self, request: httpx.Request, statuses: Mapping[int, int] | None = None
    ) -> tuple[object, int]:
        """(the answer's JSON, its status) for ``request``; an error status raises
        ``error_from`` with ``statuses``, an answer that is not JSON a 502."""
        response = await self.send(request, stream=False)
        content = response.content
        if response.status_code >= 400:
            raise error_from(response, content, statuses)
        try:
            return orjson.loads(content), response.status_code
        except orjson.JSONDecodeError:
            raise UpstreamHTTPError(
                502, "the upstream answered with something that is not JSON"
            ) from None

    async def embeddings(
        self, deployment: Deployment, body: JSONObject, timeout: httpx.Timeout
    ) -> JSONObject:
        """``POST /embeddings`` on the deployment's api_base: OpenAI's answer as it is."""
        body = {**body, "model": deployment.litellm_model.removeprefix("openai/")}
        response = await self.send(
            self._post(deployment, "/embeddings", body, timeout), stream=False
        )
        if response.status_code >= 400:
            raise error_from(response, response.content)
        try:
            data = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise UpstreamHTTPError(
                502, "the upstream answered with something that is not JSON"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise UpstreamHTTPError(502, data if isinstance(data, dict) else str(data)[:2000])
        return data

    async def open_stream(
        self,
        deployment: Deployment,
        messages: Sequence[Mapping[str, object]],
        params: Mapping[str, object],
        timeout: httpx.Timeout,
    ) -> SSEStream:
        request = self._request(deployment, messages, params, timeout, stream=True)
        return SSEStream(await self.send_for_events(request, deployment.model_name))

    async def send_for_events(
        self, request: httpx.Request, model_name: str, statuses: Mapping[int, int] | None = None
    ) -> httpx.Response:
        """The streamed response to ``request``, once it is an event stream (an error, or
        another content type, raises: ``error_from`` with ``statuses``, ``not_a_stream``)."""
        response = await self.send(request, stream=True)
        if response.status_code >= 400:
            try:
                content = await response.aread()
            finally:
                await response.aclose()
            raise error_from(response, content, statuses)
        content_type = response.headers.get("content-type", "")
        if content_type and "text/event-stream" not in content_type.lower():
            try:
                content = await response.aread()
            finally:
                await response.aclose()
            raise not_a_stream(model_name, response, content_type, content)
        return response
