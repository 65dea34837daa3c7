"""Every model call goes through here: routing, one retry loop, fallbacks, timeouts, cost.

litellm does the provider translation; its own retries (and the OpenAI SDK's) are switched off
so that there is exactly one retry loop in the system, this one. Plain OpenAI-compatible
deployments skip litellm and go over ``openai_compat``'s pooled HTTP client (its docstring says
why), and so do Anthropic deployments whose request litellm would translate plainly
(``anthropic_direct``: the same body and the same answer as litellm's); litellm is imported on
the first call that needs it, not at start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import httpx
import orjson

from app.core import metrics
from app.core.errors import ContextGateError, UpstreamError
from app.llm import fastpath
from app.llm.anthropic_direct import AnthropicTransport, Unsupported, is_direct_anthropic
from app.llm.completion import Completion, RetryPolicy
from app.llm.errors import is_retryable, map_upstream_error, retry_after_seconds
from app.llm.model_info import ModelInfo, model_info_for
from app.llm.openai_compat import OpenAICompatTransport, is_direct
from app.llm.params import strip_control_params
from app.llm.pricing import UsageCost
from app.llm.responses import Usage, normalize_completion, usage_of
from app.llm.routing import Deployment, ModelRouter, is_anthropic
from app.llm.stream_handle import StreamHandle, incomplete_stream
from app.wire.embeddings import EmbeddingInput, EmbeddingsResponse

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["Completion", "LLMClient", "RetryPolicy", "StreamHandle", "Usage"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


def _litellm() -> ModuleType:
    """litellm, imported (and its hot-path overhead switched off) on first use."""
    import litellm

    fastpath.install()  # idempotent: its logging, pricing and the SDK's body walk (fastpath.py)
    fastpath.internal_call()
    return litellm


def litellm_copy(messages: Sequence[Mapping[str, object]]) -> list[dict[str, Any]]:
    """The messages as litellm's own: its provider translations may change a message in place,
    and the prompt's messages are shared with the ledger's memory (app/turns/ledger_parts.py)."""
    return cast(list[dict[str, Any]], orjson.loads(orjson.dumps(list(messages))))


class LLMClient:
    def __init__(
        self,
        router: ModelRouter,
        *,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        connect_timeout_s: float = 10.0,
        first_token_timeout_s: float = 120.0,
        direct: bool = True,
    ) -> None:
        self.router = router
        # None: every call goes through litellm (CONTEXTGATE_UPSTREAM_TRANSPORT=litellm).
        self.transport = OpenAICompatTransport() if direct else None
        # Anthropic deployments litellm would translate plainly: over the same pool.
        self.anthropic = AnthropicTransport(self.transport) if self.transport is not None else None
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.first_token_timeout_s = first_token_timeout_s
        self.retry = retry or RetryPolicy()

    def needs_litellm(self) -> bool:
        """Whether some model name this router can serve is reached through litellm: then
        litellm is imported at start (seconds) rather than by the first such request."""
        if self.transport is None or not self.router.upstream_base_url:
            return True  # every call, or every name outside model_list, goes through litellm
        return not all(is_direct(deployment) for deployment in self.router.deployments())

    def warm_up(self, *, embeddings: bool = False) -> None:
        """Import litellm now if calls will need it (see ``needs_litellm``); embeddings always
        go through litellm."""
        if embeddings or self.needs_litellm():
            _litellm()

    async def aclose(self) -> None:
        if self.transport is not None:
            await self.transport.aclose()

    def _timeout(self, deployment: Deployment, timeout: float | None) -> httpx.Timeout:
        # A config's timeout is a number, or a string of one.
        total = float(
            cast("float | str", timeout or deployment.params.get("timeout") or self.timeout_s)
        )
        # httpx timeouts: connecting may take connect_timeout_s; every read, the total.
        return httpx.Timeout(total, connect=min(total, self.connect_timeout_s))

    # ---- model facts -----------------------------------------------------------------
    def model_info(self, model_name: str) -> ModelInfo:
        return model_info_for(self.router.primary(model_name))

    def price(self, deployment: Deployment, usage: Usage | None) -> UsageCost:
        """The usage priced with its prompt cache: reads and 5m / 1h writes at their rates."""
        if usage is None:
            return UsageCost()
        return model_info_for(deployment).price(usage.raw or usage.counts())

    def cost(self, deployment: Deployment, usage: Usage | None) -> tuple[float, float]:
        """(prompt cost, completion cost) of ``price``: the prompt's cache included."""
        priced = self.price(deployment, usage)
        return priced.prompt_cost, priced.completion_cost

    # ---- calls -------------------------------------------------------------------------
    def _anthropic_request(
        self,
        deployment: Deployment,
        messages: Sequence[Mapping[str, object]],
        params: Mapping[str, object],
        headers: Mapping[str, str] | None,
        timeout: float | None,
        *,
        stream: bool,
    ) -> httpx.Request | None:
        """The direct Anthropic request litellm would send, or None: through litellm."""
        if self.anthropic is None or not is_direct_anthropic(deployment):
            return None
        try:
            return self.anthropic.request(
                deployment,
                messages,
                params,
                headers,
                self._timeout(deployment, timeout),
                stream=stream,
            )
        except Unsupported as exc:
            logger.debug("anthropic call through litellm: %s", exc)
            return None

    def _call_kwargs(
        self,
        deployment: Deployment,
        params: Mapping[str, object],
        timeout: float | None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, object]:
        """litellm's keyword arguments: the request's params, the deployment's, our controls."""
        kwargs = {**strip_control_params(params), **deployment.params}
        if headers and is_anthropic(deployment):
            # The client's anthropic-version / anthropic-beta; the deployment's own win.
            extra = cast("Mapping[str, str]", kwargs.get("extra_headers") or {})
            kwargs["extra_headers"] = {**headers, **extra}
        kwargs["timeout"] = self._timeout(deployment, timeout)
        kwargs["num_retries"] = 0
        kwargs["max_retries"] = 0
        # litellm routes any call with `tools` through its MCP handler, which needs the optional
        # `mcp` package; plain function tools do not need it.
        kwargs["_skip_mcp_handler"] = True
        return kwargs

    async def complete(
        self,
        model_name: str,
        messages: Sequence[Mapping[str, object]],
        params: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Completion:
        """One completion; ``headers`` go upstream only to Anthropic deployments."""

        async def call(deployment: Deployment) -> Completion:
            raw: object  # litellm's ModelResponse, or the direct path's JSON (normalized below)
            anthropic = self._anthropic_request(
                deployment, messages, params or {}, headers, timeout, stream=False
            )
            if self.transport is not None and is_direct(deployment):
                raw = await self.transport.complete(
                    deployment, messages, params or {}, self._timeout(deployment, timeout)
                )
            elif anthropic is not None and self.anthropic is not None:
                raw = await self.anthropic.complete(deployment, anthropic)
            else:
                raw = await _litellm().acompletion(
                    model=deployment.litellm_model,
                    messages=litellm_copy(messages),
                    **self._call_kwargs(deployment, params or {}, timeout, headers),
                )
            response = normalize_completion(raw, model_name)
            usage = usage_of(response.get("usage"))
            cost = self.price(deployment, usage)
            return Completion(
                response,
                usage,
                deployment,
                prompt_cost=cost.prompt_cost,
                completion_cost=cost.completion_cost,
                cache_read_cost=cost.cache_read_cost,
                cache_write_cost=cost.cache_write_cost,
            )

        return await self._with_retries(model_name, call, retry)

    async def embed(
        self, model_name: str, texts: list[str], *, timeout: float | None = None
    ) -> tuple[list[list[float]], float]:
        """Embeddings of ``texts`` (same order) and their cost in USD."""

        async def call(deployment: Deployment) -> tuple[list[list[float]], float]:
            kwargs = {**deployment.params, "timeout": timeout or self.timeout_s}
            kwargs["num_retries"] = 0
            raw = await _litellm().aembedding(model=deployment.litellm_model, input=texts, **kwargs)
            data = sorted(raw["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
            usage = getattr(raw, "usage", None)
            tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            return vectors, model_info_for(deployment).cost(tokens, 0)[0]

        return await self._with_retries(model_name, call, None)

    async def embeddings(
        self, model_name: str, input: EmbeddingInput, params: Mapping[str, object]
    ) -> tuple[EmbeddingsResponse, float]:
        """``POST /v1/embeddings`` passed through: OpenAI's response (float vectors) and its
        cost in USD; routing, retries and fallbacks as for completions. A plain
        OpenAI-compatible deployment is called directly, like chat (litellm not imported)."""

        async def call(deployment: Deployment) -> tuple[EmbeddingsResponse, float]:
            raw: Any  # litellm's EmbeddingResponse, or the direct path's JSON: read by key
            if self.transport is not None and is_direct(deployment):
                body = {**strip_control_params(params), "input": input, "encoding_format": "float"}
                raw = await self.transport.embeddings(
                    deployment, body, self._timeout(deployment, None)
                )
                tokens = int((raw.get("usage") or {}).get("prompt_tokens") or 0)
            else:
                kwargs = {**strip_control_params(params), **deployment.params}
                kwargs.update(
                    timeout=self.timeout_s, num_retries=0, max_retries=0, encoding_format="float"
                )
                raw = await _litellm().aembedding(
                    model=deployment.litellm_model, input=input, **kwargs
                )
                tokens = int(getattr(getattr(raw, "usage", None), "prompt_tokens", 0) or 0)
            data = sorted(raw["data"], key=lambda item: item["index"])
            response: EmbeddingsResponse = {
                "object": "list",
                "data": [
                    {
                        "object": "embedding",
                        "index": int(item["index"]),
                        "embedding": [float(x) for x in item["embedding"]],
                    }
                    for item in data
                ],
                "model": model_name,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
            return response, model_info_for(deployment).cost(tokens, 0)[0]

        return await self._with_retries(model_name, call, None)

    async def stream(
        self,
        model_name: str,
        messages: Sequence[Mapping[str, object]],
        params: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> StreamHandle:
        """Open a stream; retries and fallbacks apply until its first chunk has arrived.
        ``headers`` go upstream only to Anthropic deployments."""

        async def call(deployment: Deployment) -> StreamHandle:
            opened: list[AsyncIterator[object]] = []

            async def first_chunk() -> object | None:
                response: AsyncIterable[object]  # SSEStream, or litellm's CustomStreamWrapper
                anthropic = self._anthropic_request(
                    deployment, messages, params or {}, headers, timeout, stream=True
                )
                if self.transport is not None and is_direct(deployment):
                    response = await self.transport.open_stream(
                        deployment, messages, params or {}, self._timeout(deployment, timeout)
                    )
                elif anthropic is not None and self.anthropic is not None:
                    response = await self.anthropic.open_stream(deployment, anthropic)
                else:
                    kwargs = self._call_kwargs(deployment, params or {}, timeout, headers)
                    kwargs["stream_options"] = {"include_usage": True}
                    response = await _litellm().acompletion(
                        model=deployment.litellm_model,
                        messages=litellm_copy(messages),
                        stream=True,
                        **kwargs,
                    )
                opened.append(response.__aiter__())
                try:
                    return await opened[0].__anext__()
                except StopAsyncIteration:
                    return None

            limit = min(self.first_token_timeout_s, timeout or self.timeout_s)
            try:
                async with asyncio.timeout(limit):  # in this task: no extra task to schedule
                    first = await first_chunk()
            except TimeoutError:
                if opened:
                    await StreamHandle(None, opened[0], deployment).aclose()
                raise UpstreamError(
                    f"The upstream for model '{model_name}' sent no first token "
                    f"within {limit:g} s.",
                    status_code=504,
                    error_type="timeout",
                    code="first_token_timeout",
                ) from None
            if first is None:  # not one chunk: nothing was answered (a retry may do better)
                raise incomplete_stream(model_name)
            return StreamHandle(first, opened[0], deployment)

        return await self._with_retries(model_name, call, None)

    async def _with_retries(
        self,
        model_name: str,
        call: Callable[[Deployment], Awaitable[T]],
        retry: RetryPolicy | None,
    ) -> T:
        policy = retry or self.retry
        deployments = self.router.resolve(model_name)
        error: ContextGateError | None = None
        tries = 0
        for deployment in deployments:
            for attempt in range(policy.max_retries + 1):
                tries += 1
                started = time.perf_counter()
                try:
                    result = await call(deployment)
                    metrics.record_upstream(model_name, "ok", time.perf_counter() - started)
                    return result
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    metrics.record_upstream(model_name, "error", time.perf_counter() - started)
                    error = map_upstream_error(exc, model_name)
                    logger.warning(
                        "upstream call failed",
                        extra={
                            "model": model_name,
                            "deployment": deployment.litellm_model,
                            "attempt": attempt + 1,
                            "status": error.status_code,
                            "code": error.code,
                            "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
                        },
                    )
                    if not is_retryable(error):
                        break
                    delay = policy.delay(attempt, retry_after_seconds(exc))
                    if attempt >= policy.max_retries or delay > policy.max_backoff_s:
                        break
                    await asyncio.sleep(delay)
            if error is not None and error.status_code in (400, 413, 422):
                break  # the request itself is wrong: another deployment will say the same
        assert error is not None
        if error.code == "model_not_found":
            error = self.router.not_served(model_name, error.message)
        if tries > 1:
            # The SDKs would retry on top of these tries (the OpenAI SDKs honour this header).
            error.headers = {**error.headers, "x-should-retry": "false"}
        raise error
