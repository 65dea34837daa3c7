"""OpenAI's own Responses API for OpenAI and Azure OpenAI deployments (the native path).

The Responses door normally works in the chat form: the turn goes upstream as a chat
completion. For OpenAI's reasoning models that loses what only their Responses API carries:
reasoning items with ``encrypted_content`` (sent back, they let the model continue its
reasoning across a tool loop) and hosted tools (web_search, file_search, code_interpreter…).
So for a deployment that counts as OpenAI (``native_route``), the door's turn is sent with
litellm's ``aresponses``: the full managed input contextgate built, as Responses items, with
``store: false`` (no provider-side state is relied on; contextgate keeps the conversation),
``include: ["reasoning.encrypted_content"]`` for reasoning models, and the request's tools,
hosted ones included. What comes back is stored in the chat form (responses_items.py).

An OpenAI-compatible server may have no ``/responses``: its 404 (or 405) makes the turn go
through the chat form instead, and the deployment is remembered (in this process) as one
without it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel

from app.core.errors import UpstreamError
from app.llm.client import Completion, LLMClient, StreamHandle, _litellm
from app.llm.params import strip_control_params
from app.llm.responses import usage_of
from app.llm.responses_items import (
    NativeInput,
    chat_answer,
    chat_usage,
    event_chunk,
    finish_reason,
)
from app.llm.routing import Deployment
from app.llm.stream_handle import incomplete_stream
from app.wire.chat import ChatCompletion
from app.wire.json import JSONObject
from app.wire.stream import ChatChunk

if TYPE_CHECKING:
    from app.core.settings import Settings

__all__ = [
    "ENCRYPTED_REASONING",
    "NativeAnswer",
    "NativeRequest",
    "NativeStream",
    "native_chain",
    "native_complete",
    "native_route",
    "native_stream",
]

logger = logging.getLogger(__name__)

ENCRYPTED_REASONING = "reasoning.encrypted_content"
NativeMode = Literal["auto", "always", "off"]
_OWN_HOSTS = re.compile(
    r"(^|[/.])api\.openai\.com|\.openai\.azure\.com|\.cognitiveservices\.azure\.com"
)
# What a client's Responses request may set beyond the turn itself (the rest is the door's or
# contextgate's: input, store, previous_response_id, conversation, truncation, background).
_SIGNATURE_PARAMS = (
    "max_output_tokens",
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "user",
    "service_tier",
    "safety_identifier",
)
_EXTRA_PARAMS = ("prompt_cache_key", "top_logprobs", "max_tool_calls", "prompt_cache_retention")
# Deployments whose server answered 404/405 for /responses: the chat form for them from now on.
_WITHOUT_RESPONSES: set[tuple[str, str]] = set()


@cache
def _silence_litellm_copies() -> None:
    """litellm's stream wrapper copies events through pydantic models that do not fit its own
    usage and content-part shapes; the warnings that says on stderr for every stream (those
    only) are silenced, once."""
    warnings.filterwarnings(
        "ignore",
        message=r"Pydantic serializer warnings:\s+PydanticSerializationUnexpectedValue\("
        r"Expected `(ResponseAPIUsage|ContentPartDone)",
        category=UserWarning,
    )


def _aresponses() -> Any:
    """litellm's ``aresponses`` (litellm imported on first use)."""
    _silence_litellm_copies()
    return _litellm().aresponses


@dataclass(slots=True)
class NativeRequest:
    """What a Responses request asks of the native call beyond the managed input; ``output``
    is set by the call when the turn was answered natively (the door renders it)."""

    tools: list[JSONObject] | None = None
    tool_choice: str | JSONObject | None = None
    include: list[str] = field(default_factory=list)
    reasoning: JSONObject | None = None
    text: JSONObject | None = None
    params: JSONObject = field(default_factory=dict)
    output: list[JSONObject] | None = None

    @property
    def wants_encrypted_reasoning(self) -> bool:
        return ENCRYPTED_REASONING in self.include

    @classmethod
    def of(cls, fields: JSONObject) -> NativeRequest:
        """From a Responses request's fields (``model_dump`` with its extras)."""
        include = [str(value) for value in fields.get("include") or () if isinstance(value, str)]
        known = (*_SIGNATURE_PARAMS, *_EXTRA_PARAMS)
        params = {key: fields[key] for key in known if fields.get(key) is not None}
        return cls(
            tools=fields.get("tools"),
            tool_choice=fields.get("tool_choice"),
            include=include,
            reasoning=fields.get("reasoning"),
            text=fields.get("text"),
            params=params,
        )


@dataclass(slots=True)
class NativeAnswer:
    completion: Completion  # the answer in the chat form (stored, costed)
    output: list[JSONObject]  # the output items as the provider sent them


def _provider(deployment: Deployment) -> str | None:
    provider = deployment.params.get("custom_llm_provider")
    if provider is not None:
        return str(provider)
    model = deployment.litellm_model
    if "/" in model:
        return model.split("/", 1)[0]
    try:  # a bare name (pass-through mode): litellm knows whose it is
        return str(_litellm().get_llm_provider(model=model)[1])
    except Exception:
        return None


def native_route(deployment: Deployment, mode: NativeMode) -> bool:
    """Whether the deployment is called on its own Responses API (module docstring)."""
    base = deployment.params.get("api_base")
    if (deployment.litellm_model, str(base or "")) in _WITHOUT_RESPONSES:
        return False
    flag = deployment.model_info.get("responses_api")
    if flag is not None:
        return bool(flag)
    if mode == "off" or _provider(deployment) not in ("openai", "azure"):
        return False
    return mode == "always" or not base or bool(_OWN_HOSTS.search(str(base)))


def native_chain(llm: LLMClient, model_name: str, settings: Settings) -> bool:
    """Whether every deployment that may serve the name (fallbacks included) goes native."""
    chain = llm.router.candidates(model_name)
    return bool(chain) and all(native_route(d, settings.responses_native) for d in chain)


def _reasons(deployment: Deployment, request: NativeRequest) -> bool:
    """Whether to ask for encrypted reasoning: the client asked, it sets ``reasoning``, or the
    model reasons (model_info.supports_reasoning, else litellm's model map)."""
    if request.wants_encrypted_reasoning or request.reasoning:
        return True
    flag = deployment.model_info.get("supports_reasoning")
    if flag is not None:
        return bool(flag)
    try:
        return bool(_litellm().supports_reasoning(model=deployment.litellm_model))
    except Exception:
        return False


def _kwargs(
    llm: LLMClient, deployment: Deployment, request: NativeRequest, items: list[NativeInput]
) -> dict[str, object]:
    """litellm's ``aresponses`` keyword arguments for this call."""
    include = list(request.include)
    if _reasons(deployment, request) and ENCRYPTED_REASONING not in include:
        include.append(ENCRYPTED_REASONING)
    body: dict[str, object] = {
        "input": items,
        "store": False,
        "include": include or None,
        "tools": request.tools,
        "tool_choice": request.tool_choice,
        "reasoning": request.reasoning,
        "text": request.text,
        **{k: v for k, v in request.params.items() if k in _SIGNATURE_PARAMS},
    }
    kwargs = {**strip_control_params({k: v for k, v in body.items() if v is not None})}
    kwargs.update(deployment.params)
    extra = {k: v for k, v in request.params.items() if k in _EXTRA_PARAMS}
    if extra:
        kwargs["extra_body"] = extra
    timeout = llm._timeout(deployment, None)
    kwargs.update(timeout=timeout, num_retries=0, max_retries=0, _skip_mcp_handler=True)
    return kwargs


def _dump(obj: object) -> JSONObject:
    """litellm's object as the provider sent it: only the fields it set (the upstream
    boundary: what the provider's Responses API returned, as JSON)."""
    if isinstance(obj, dict):
        return obj
    model = cast(BaseModel, obj)  # litellm's Responses objects are pydantic models
    data: JSONObject = model.model_dump(mode="json", exclude_unset=True, warnings=False)
    return data


class ResponsesUnavailable(UpstreamError):
    """The deployment's server has no Responses API (404/405 for /responses)."""

    def __init__(self) -> None:
        super().__init__("no Responses API", status_code=404, code="responses_unavailable")


_ITEM_ERRORS = re.compile(r"\bitem\b|previous response|model", re.IGNORECASE)


def _unavailable(deployment: Deployment, exc: BaseException) -> ResponsesUnavailable | None:
    """A 404/405 that says the path is unknown (not an unknown item or model): remember."""
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", None) or exc)
    if status not in (404, 405) or _ITEM_ERRORS.search(message):
        return None
    base = str(deployment.params.get("api_base") or "")
    _WITHOUT_RESPONSES.add((deployment.litellm_model, base))
    logger.info(
        "no Responses API upstream: the chat form from now on",
        extra={"deployment": deployment.litellm_model, "status": status},
    )
    return ResponsesUnavailable()


async def native_complete(
    llm: LLMClient, model_name: str, items: list[NativeInput], request: NativeRequest
) -> NativeAnswer | None:
    """One Responses call (routing, retries, fallbacks as for chat); None: no Responses API
    upstream, answer through the chat form."""

    async def call(deployment: Deployment) -> NativeAnswer:
        try:
            raw = await _aresponses()(
                model=deployment.litellm_model, **_kwargs(llm, deployment, request, items)
            )
        except Exception as exc:
            raise _unavailable(deployment, exc) or exc from None
        response = _dump(raw)
        output = [item for item in response.get("output") or () if isinstance(item, dict)]
        usage = chat_usage(response.get("usage"))
        message = chat_answer(output)
        chat: ChatCompletion = {
            "object": "chat.completion",
            "model": model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(response)}],
            "usage": usage,
        }
        parsed = usage_of(usage)
        priced = llm.price(deployment, parsed)  # cached input at the cache-read rate
        completion = Completion(
            chat,
            parsed,
            deployment,
            priced.prompt_cost,
            priced.completion_cost,
            priced.cache_read_cost,
            priced.cache_write_cost,
        )
        return NativeAnswer(completion, output)

    try:
        return await llm._with_retries(model_name, call, None)
    except ResponsesUnavailable:
        return None


class NativeStream(StreamHandle):
    """A Responses stream read as the stream lifecycle reads a chat stream (responses_items
    ``event_chunk``): every chunk carries its typed event for the Responses door."""

    def __init__(
        self, first: JSONObject, rest: AsyncIterator[object], deployment: Deployment
    ) -> None:
        super().__init__(first, rest, deployment)
        self._upstream = rest  # litellm's Responses stream (its events: pydantic models)
        self._pending: JSONObject | None = first

    async def chunks(self) -> AsyncIterator[ChatChunk]:
        calls: list[str] = []
        finished = False
        events = self._events()
        async for event in events:
            kind = event.get("type")
            if kind in ("response.failed", "error"):
                raise _stream_error(event)
            finished = finished or kind in ("response.completed", "response.incomplete")
            yield event_chunk(event, calls)
        if not finished:
            raise incomplete_stream(self.deployment.model_name)

    async def aclose(self) -> None:
        """Stop the upstream: litellm's Responses stream has no ``aclose``; its HTTP response
        does."""
        response = getattr(self._rest, "response", None)
        try:
            await response.aclose() if response is not None else await super().aclose()
        except Exception:  # the stream is being abandoned; nothing to save
            logger.debug("closing the upstream Responses stream failed", exc_info=True)

    async def _events(self) -> AsyncIterator[JSONObject]:
        if self._pending is not None:
            first, self._pending = self._pending, None
            yield first
        async for raw in self._upstream:
            yield _dump(raw)


def _stream_error(event: JSONObject) -> UpstreamError:
    error = event.get("error") or (event.get("response") or {}).get("error") or event
    message = str(error.get("message") if isinstance(error, dict) else error)
    return UpstreamError(f"The upstream failed mid-answer: {message}", code="upstream_error")


async def native_stream(
    llm: LLMClient, model_name: str, items: list[NativeInput], request: NativeRequest
) -> NativeStream | None:
    """Open a Responses stream; retries and fallbacks apply until its first event. None: no
    Responses API upstream, answer through the chat form."""

    async def call(deployment: Deployment) -> NativeStream:
        opened: list[AsyncIterator[object]] = []

        async def first_event() -> JSONObject | None:
            kwargs = _kwargs(llm, deployment, request, items)
            try:
                stream = await _aresponses()(model=deployment.litellm_model, stream=True, **kwargs)
            except Exception as exc:
                raise _unavailable(deployment, exc) or exc from None
            opened.append(stream.__aiter__())
            try:
                return _dump(await opened[0].__anext__())
            except StopAsyncIteration:
                return None

        limit = min(llm.first_token_timeout_s, llm.timeout_s)
        try:
            async with asyncio.timeout(limit):
                first = await first_event()
        except TimeoutError:
            if opened:
                await StreamHandle(None, opened[0], deployment).aclose()
            raise UpstreamError(
                f"The upstream for model '{model_name}' sent no first event within {limit:g} s.",
                status_code=504,
                error_type="timeout",
                code="first_token_timeout",
            ) from None
        if first is None:
            raise incomplete_stream(model_name)
        return NativeStream(first, opened[0], deployment)

    try:
        return await llm._with_retries(model_name, call, None)
    except ResponsesUnavailable:
        return None
