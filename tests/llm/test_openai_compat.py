"""The direct transport to OpenAI-compatible upstreams: routing rule, wire shape, errors.

respx stands in for the upstream (it intercepts the transport's connection pool); errors go through
``LLMClient`` so that what is asserted is what a client of contextgate would see. The streaming
tests (SSE parsing, stream errors, first-token timeout) are in test_openai_compat_stream.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
import respx

import app  # noqa: F401  (offline defaults before litellm)
from app.core.errors import ContextLengthExceeded, RateLimited
from app.llm.client import LLMClient
from app.llm.http1 import HEAD, _head
from app.llm.openai_compat import OpenAICompatTransport, _headers, is_direct
from app.llm.routing import Deployment, ModelRouter
from tests.support.openai_compat import BASE, KEY, MESSAGES, MODEL, URL, USAGE, chunk, failure, sse

# The fixtures, by name for pytest to find; ``x as x`` marks them as re-exported, not unused.
from tests.support.openai_compat import llm as llm
from tests.support.openai_compat import upstream as upstream

COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                 "finish_reason": "stop"}],
    "usage": USAGE,
}  # fmt: skip


def deployment(model: str = f"openai/{MODEL}", **params: Any) -> Deployment:
    return Deployment(MODEL, model, params)


# --- which deployments go direct ----------------------------------------------------------------


def test_is_direct_rules() -> None:
    assert is_direct(deployment(api_base=BASE))
    assert is_direct(
        deployment(api_base=BASE, api_key="k", organization="o", timeout=5, extra_headers={})
    )
    assert is_direct(ModelRouter(upstream_base_url=BASE).resolve("anything")[0])
    assert not is_direct(deployment(api_base=BASE, rpm=10))
    assert not is_direct(deployment(api_base=BASE, drop_params=True))
    assert not is_direct(deployment(api_key="k"))
    assert not is_direct(deployment(api_base=""))
    assert not is_direct(deployment("anthropic/claude-3-5-haiku", api_base=BASE))
    assert not is_direct(deployment("gpt-4o-mini", api_base=BASE))
    assert not is_direct(ModelRouter().resolve("gpt-4o-mini")[0])


# --- request shape ------------------------------------------------------------------------------

CLIENT_PARAMS: dict[str, Any] = {
    "temperature": 0.2, "user": "u-1", "seed": 3, "vendor_top_k": 40,  # forwarded
    "api_base": "http://evil.test", "api_key": "sk-client", "timeout": 1, "organization": "x",
    "extra_headers": {"x-evil": "1"}, "litellm_logging_obj": 1, "input_cost_per_token": 9,
    "num_retries": 5, "mock_response": "no", "_private": 1, "model": "client-model",
}  # fmt: skip
FORWARDED = {"temperature": 0.2, "user": "u-1", "seed": 3, "vendor_top_k": 40}


async def test_non_stream_request_shape(upstream: respx.MockRouter) -> None:
    route = upstream.post(URL).respond(200, json=COMPLETION)
    transport = OpenAICompatTransport()
    target = deployment(api_base=BASE + "/", api_key=KEY, organization="org-1",
                        extra_headers={"X-Vendor": "v1"})  # fmt: skip
    params = {**CLIENT_PARAMS, "stream": True, "stream_options": {"include_usage": True}}
    data = await transport.complete(target, MESSAGES, params, httpx.Timeout(30, connect=2))
    await transport.aclose()
    assert data == COMPLETION
    assert route.call_count == 1
    request = route.calls.last.request
    assert str(request.url) == URL
    assert request.headers.get_list("authorization") == [f"Bearer {KEY}"]
    assert request.headers["openai-organization"] == "org-1"
    assert request.headers["x-vendor"] == "v1"
    assert "x-evil" not in request.headers
    assert request.extensions["timeout"] == {"connect": 2, "read": 30, "write": 30, "pool": 30}
    assert orjson.loads(request.content) == {**FORWARDED, "model": MODEL, "messages": MESSAGES}


async def test_stream_request_shape_and_no_key(upstream: respx.MockRouter) -> None:
    route = upstream.post(URL).respond(200, content=sse(chunk({"content": "x"}), "data: [DONE]"))
    transport = OpenAICompatTransport()
    params = {**CLIENT_PARAMS, "stream_options": {"include_usage": False}}
    stream = await transport.open_stream(
        deployment(api_base=BASE), MESSAGES, params, httpx.Timeout(5)
    )
    assert len([event async for event in stream]) == 1
    await transport.aclose()
    request = route.calls.last.request
    assert str(request.url) == URL
    assert "authorization" not in request.headers
    assert "openai-organization" not in request.headers
    assert orjson.loads(request.content) == {
        **FORWARDED, "model": MODEL, "messages": MESSAGES,
        "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip


async def test_completion_through_the_client(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    reasoning = {**COMPLETION["choices"][0]["message"], "reasoning": "thought"}
    body = {**COMPLETION, "choices": [{**COMPLETION["choices"][0], "message": reasoning}]}
    route = upstream.post(URL).respond(200, json=body)
    result = await llm().complete(MODEL, MESSAGES, {"temperature": 0})
    assert result.content == "hi"
    assert result.usage is not None
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (5, 2)
    assert result.response["choices"][0]["message"]["reasoning_content"] == "thought"
    assert result.response["choices"][0]["finish_reason"] == "stop"
    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"


# --- the request's URL and headers, built once per api_base / key / headers ----------------------


def _as_httpx_builds_it(target: Deployment, body: dict[str, Any]) -> httpx.Request:
    """The request as httpx makes it from ``content=`` (what ``_post`` built on every call
    before its URL and headers were kept per target)."""
    return httpx.Request(
        "POST",
        str(target.params["api_base"]).rstrip("/") + "/chat/completions",
        content=orjson.dumps(body),
        headers=_headers(target),
        extensions={"timeout": httpx.Timeout(7).as_dict()},
    )


@pytest.mark.parametrize(
    "params",
    [
        {"api_base": BASE + "/", "api_key": KEY, "organization": "org-1",
         "extra_headers": {"X-Vendor": "v1", "Authorization": "Bearer configured"}},
        {"api_base": BASE},
        {"api_base": "http://upstream.test:8080/v1", "extra_headers": {"Host": "other.test"}},
        {"api_base": BASE, "extra_headers": {"Content-Length": "3"}},  # built per call
        {"api_base": BASE, "api_key": 12345},  # not a string: built per call
    ],
)  # fmt: skip
async def test_a_request_goes_out_as_httpx_builds_it(params: dict[str, Any]) -> None:
    transport = OpenAICompatTransport()
    target = deployment(**params)
    for body in ({"model": MODEL, "messages": MESSAGES}, {"model": MODEL, "messages": []}):
        sent = transport._post(target, "/chat/completions", body, httpx.Timeout(7))
        expected = _as_httpx_builds_it(target, body)
        assert sent.method == expected.method
        assert str(sent.url) == str(expected.url)
        assert sent.headers.raw == expected.headers.raw  # names, case, order, Content-Length
        assert sent.content == expected.content
        head = sent.extensions.pop(HEAD, None)  # the pool's, when the target has one
        assert head is None or head == _head(expected)[0]  # byte for byte what it would write
        assert sent.extensions == expected.extensions
    await transport.aclose()


def test_a_target_with_a_broken_header_leaves_the_head_to_the_pool() -> None:
    transport = OpenAICompatTransport()
    target = deployment(api_base=BASE, extra_headers={"X-A": "1\r\nX-B: 2"})
    sent = transport._post(target, "/chat/completions", {"model": MODEL}, httpx.Timeout(5))
    assert HEAD not in sent.extensions
    with pytest.raises(httpx.LocalProtocolError):
        _head(sent)


async def test_deployments_share_a_target_only_with_the_same_key() -> None:
    """Deployments made per request (CONTEXTGATE_UPSTREAM_BASE_URL) share one; another key
    or another header never gets the first one's."""
    transport = OpenAICompatTransport()
    body = {"model": MODEL, "messages": MESSAGES}

    def authorization(**params: Any) -> str | None:
        request = transport._post(deployment(**params), "/chat/completions", body, httpx.Timeout(5))
        return request.headers.get("authorization")

    assert authorization(api_base=BASE, api_key="sk-a") == "Bearer sk-a"
    assert authorization(api_base=BASE, api_key="sk-a") == "Bearer sk-a"
    assert len(transport._targets) == 1
    assert authorization(api_base=BASE, api_key="sk-b") == "Bearer sk-b"
    assert authorization(api_base=BASE) is None
    assert authorization(api_base=BASE, api_key="sk-a", extra_headers={"authorization": "x"}) == "x"
    assert authorization(api_base=BASE, api_key="sk-a") == "Bearer sk-a"
    assert len(transport._targets) == 4
    await transport.aclose()


# --- errors -------------------------------------------------------------------------------------


async def test_429_is_retried_and_keeps_retry_after(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    body = {"error": {"message": "slow down", "code": "rate_limit"}}
    limited = httpx.Response(429, headers={"Retry-After": "0.01"}, json=body)
    route = upstream.post(URL).mock(return_value=limited)
    error = await failure(llm(retries=2))
    assert isinstance(error, RateLimited)
    assert error.headers == {"Retry-After": "1", "x-should-retry": "false"}  # retried here
    assert "slow down" in error.message
    assert route.call_count == 3
    # Longer than the policy's max backoff: given up at once, the header still passed on.
    route.mock(return_value=httpx.Response(429, headers={"Retry-After": "30"}))
    route.reset()
    error = await failure(llm(retries=2))
    assert (error.status_code, error.headers, route.call_count) == (429, {"Retry-After": "30"}, 1)
    # And one more try can succeed.
    route.mock(side_effect=[httpx.Response(429), httpx.Response(200, json=COMPLETION)])
    route.reset()
    assert (await llm(retries=1).complete(MODEL, MESSAGES)).content == "hi"
    assert route.call_count == 2


@pytest.mark.parametrize(
    ("status", "body", "retries", "calls", "expected_status", "code", "in_message"),
    [
        (500, {"error": {"message": "engine died"}}, 2, 3, 502, "upstream_error", "engine died"),
        (503, b"", 1, 2, 502, "upstream_error", "HTTP 503"),
        (502, b"<html><h1>Bad Gateway</h1></html>", 1, 2, 502, "upstream_error", "<h1>Bad Gateway"),
        (400, {"error": {"message": "too long", "code": "context_length_exceeded"}}, 2, 1, 400,
         "context_length_exceeded", "too long"),
        (400, {"object": "error", "message": "This model's maximum context length is 4096 tokens."
               " However, you requested 5000 tokens.", "type": "BadRequestError", "code": 400},
         2, 1, 400, "context_length_exceeded", "maximum context length is 4096"),
        (400, {"error": {"message": "Invalid 'temperature'", "code": "invalid_value"}}, 2, 1, 400,
         "invalid_value", "Invalid 'temperature'"),
        (401, {"error": {"message": "Incorrect API key"}}, 2, 1, 502, "upstream_auth_failed",
         "HTTP 401"),
        (403, {"error": {"message": "no access"}}, 2, 1, 502, "upstream_auth_failed", "no access"),
        (404, {"error": {"message": "model 'x' does not exist"}}, 2, 1, 404, "model_not_found",
         "does not exist"),
    ],
)  # fmt: skip
async def test_http_errors(
    upstream: respx.MockRouter,
    llm: Callable[..., LLMClient],
    status: int, body: Any, retries: int, calls: int, expected_status: int, code: str,
    in_message: str,
) -> None:  # fmt: skip
    kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}
    route = upstream.post(URL).respond(status, **kwargs)
    for stream in (False, True):
        route.reset()
        error = await failure(llm(retries=retries), stream=stream)
        assert (error.status_code, error.code) == (expected_status, code), error.message
        assert in_message in error.message
        assert "b'" not in error.message
        assert route.call_count == calls
    if code == "context_length_exceeded":
        assert isinstance(error, ContextLengthExceeded)
    if code == "model_not_found":
        assert error.param == "model"


@pytest.mark.parametrize(
    ("raised", "retries", "calls", "status", "code"),
    [
        (httpx.ConnectError("Connection refused"), 2, 3, 502, "upstream_unreachable"),
        (httpx.ReadTimeout("read timed out"), 2, 1, 504, "upstream_timeout"),
        (httpx.ConnectTimeout("connect timed out"), 2, 1, 504, "upstream_timeout"),
    ],
)
async def test_transport_errors(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient],
    raised: Exception, retries: int, calls: int, status: int, code: str,
) -> None:  # fmt: skip
    route = upstream.post(URL).mock(side_effect=raised)
    for stream in (False, True):
        route.reset()
        error = await failure(llm(retries=retries), stream=stream)
        assert (error.status_code, error.code, route.call_count) == (status, code, calls)
        assert MODEL in error.message


@pytest.mark.parametrize(
    ("content", "in_message"),
    [
        (b"<html>maintenance</html>", "not JSON"),
        (b'{"object": "error", "message": "backend exploded"}', "backend exploded"),
        (b"[1, 2]", "[1, 2]"),
    ],
)
async def test_200_that_is_not_a_completion_is_an_error(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient], content: bytes, in_message: str
) -> None:
    upstream.post(URL).respond(200, content=content)
    error = await failure(llm())
    assert (error.status_code, error.code) == (502, "upstream_error")
    assert in_message in error.message


# --- bugs: what litellm handles and the direct path does not ---------------------------------


async def test_bug_extra_authorization_header_replaces_the_key(
    upstream: respx.MockRouter,
) -> None:
    """A gateway's own ``Authorization`` in extra_headers: litellm sends only it."""
    route = upstream.post(URL).respond(200, json=COMPLETION)
    transport = OpenAICompatTransport()
    target = deployment(api_base=BASE, api_key=KEY, extra_headers={"Authorization": "Bearer gw"})
    await transport.complete(target, MESSAGES, {}, httpx.Timeout(5))
    await transport.aclose()
    assert route.calls.last.request.headers.get_list("authorization") == ["Bearer gw"]


async def test_bug_llama_cpp_context_overflow(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    """llama.cpp's answer for a prompt over n_ctx; litellm maps it to a context-window error."""
    message = "the request exceeds the available context size, try increasing it"
    body = {"error": {"code": 400, "type": "exceed_context_size_error", "message": message}}
    upstream.post(URL).respond(400, json=body)
    error = await failure(llm())
    assert (error.status_code, error.code) == (400, "context_length_exceeded")


async def test_bug_string_error_body_keeps_its_message(
    upstream: respx.MockRouter, llm: Callable[..., LLMClient]
) -> None:
    """Text Generation Inference answers ``{"error": "<text>", "error_type": ...}``."""
    text = "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096."
    upstream.post(URL).respond(422, json={"error": text, "error_type": "validation"})
    error = await failure(llm())
    assert text in error.message
