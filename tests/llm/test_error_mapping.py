"""What a client sees when the upstream fails: litellm's exceptions -> OpenAI-shaped errors."""

from __future__ import annotations

import httpx
import litellm.exceptions as le
import openai
import orjson
import pytest

import app  # noqa: F401  (offline defaults before litellm)
from app.core.errors import ContextGateError, UpstreamError, error_response
from app.llm.errors import is_retryable, map_upstream_error, retry_after_seconds

MODEL = "gpt-4o-mini"
REQUEST = httpx.Request("POST", "http://upstream.test/v1/chat/completions")


def response(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers or {}, request=REQUEST)


def mapped(exc: BaseException) -> ContextGateError:
    return map_upstream_error(exc, MODEL)


def envelope(error: ContextGateError) -> dict[str, object]:
    body = orjson.loads(error_response(error).body)
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_rate_limit_keeps_retry_after() -> None:
    exc = le.RateLimitError(
        "Rate limit reached for requests",
        llm_provider="openai",
        model=MODEL,
        response=response(429, {"Retry-After": "7"}),
    )
    error = mapped(exc)
    assert error.status_code == 429
    assert error.code == "rate_limit_exceeded"
    assert error.error_type == "rate_limit_error"
    assert error.headers == {"Retry-After": "7"}
    assert error_response(error).headers["retry-after"] == "7"
    assert "Rate limit reached" in error.message
    assert retry_after_seconds(exc) == 7.0
    assert is_retryable(error)


def test_rate_limit_fractional_retry_after_rounds_up_and_absent_is_absent() -> None:
    exc = le.RateLimitError(
        "slow down",
        llm_provider="openai",
        model=MODEL,
        response=response(429, {"retry-after": "1.2"}),
    )
    assert mapped(exc).headers == {"Retry-After": "2"}
    bare = le.RateLimitError(
        "slow down", llm_provider="openai", model=MODEL, response=response(429)
    )
    assert mapped(bare).status_code == 429
    assert "Retry-After" not in mapped(bare).headers


def test_upstream_auth_failure_is_a_bad_gateway_naming_our_credentials() -> None:
    exc = le.AuthenticationError(
        "Incorrect API key provided: sk-xx.", llm_provider="openai", model=MODEL,
        response=response(401),
    )  # fmt: skip
    error = mapped(exc)
    assert error.status_code == 502
    assert error.code == "upstream_auth_failed"
    assert "credentials" in error.message
    assert "401" in error.message
    assert not is_retryable(error)
    forbidden = le.PermissionDeniedError(
        "no access", llm_provider="openai", model=MODEL, response=response(403)
    )
    assert mapped(forbidden).status_code == 502
    assert mapped(forbidden).code == "upstream_auth_failed"


def test_bad_request_passes_through_with_its_message_and_code() -> None:
    exc = le.BadRequestError(
        "litellm.BadRequestError: OpenAIException - Invalid value for 'temperature'.",
        model=MODEL,
        llm_provider="openai",
        response=response(400),
        body={"error": {"message": "Invalid value for 'temperature'.", "code": "invalid_value"}},
    )
    error = mapped(exc)
    assert error.status_code == 400
    assert error.message == "Invalid value for 'temperature'."
    assert error.code == "invalid_value"
    assert envelope(error)["type"] == "invalid_request_error"
    assert not is_retryable(error)


def test_bad_request_without_a_body_loses_litellms_prefixes() -> None:
    exc = le.BadRequestError(
        "litellm.BadRequestError: OpenAIException - messages must not be empty",
        model=MODEL,
        llm_provider="openai",
        response=response(400),
    )
    assert mapped(exc).message == "messages must not be empty"


def test_context_window_exceeded_upstream() -> None:
    exc = le.ContextWindowExceededError(
        "This model's maximum context length is 8192 tokens",
        model=MODEL,
        llm_provider="openai",
        response=response(400),
    )
    error = mapped(exc)
    assert error.status_code == 400
    assert error.code == "context_length_exceeded"


def test_upstream_server_error_is_a_bad_gateway() -> None:
    exc = le.InternalServerError(
        "The server had an error", llm_provider="openai", model=MODEL, response=response(500)
    )
    error = mapped(exc)
    assert error.status_code == 502
    assert error.code == "upstream_error"
    assert "HTTP 500" in error.message
    assert is_retryable(error)
    unavailable = le.ServiceUnavailableError(
        "overloaded", llm_provider="openai", model=MODEL, response=response(503)
    )
    assert mapped(unavailable).status_code == 502


def test_connection_error_is_unreachable() -> None:
    exc = le.APIConnectionError(
        "Connection refused", llm_provider="openai", model=MODEL, request=REQUEST
    )
    error = mapped(exc)
    assert error.status_code == 502
    assert error.code == "upstream_unreachable"
    assert is_retryable(error)


def _refused_as_litellm_reports_it() -> le.InternalServerError:
    """A refused connection: litellm wraps openai's APIConnectionError into a 500."""
    try:
        try:
            try:
                raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 1)")
            except ConnectionRefusedError as os_error:
                raise httpx.ConnectError("Cannot connect to host 127.0.0.1:1") from os_error
        except httpx.ConnectError as connect_error:
            raise openai.APIConnectionError(request=REQUEST) from connect_error
    except openai.APIConnectionError as api_error:
        wrapped = le.InternalServerError(
            "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.",
            llm_provider="openai",
            model=MODEL,
        )
        wrapped.__cause__ = api_error
        return wrapped


def test_refused_connection_reported_as_http_500_is_unreachable() -> None:
    exc = _refused_as_litellm_reports_it()
    assert exc.status_code == 500
    error = mapped(exc)
    assert error.status_code == 502
    assert error.code == "upstream_unreachable"
    assert "Could not reach" in error.message


def test_plain_os_connection_error_is_unreachable() -> None:
    error = mapped(ConnectionResetError("reset by peer"))
    assert error.status_code == 502
    assert error.code == "upstream_unreachable"


def test_timeouts_are_gateway_timeouts() -> None:
    for exc in (
        le.Timeout("Request timed out.", model=MODEL, llm_provider="openai"),
        TimeoutError(),
        TimeoutError("slow"),
    ):
        error = mapped(exc)
        assert error.status_code == 504, exc
        assert error.code == "upstream_timeout"
        assert envelope(error)["type"] == "timeout"
        assert not is_retryable(error)


def test_unknown_model_upstream_is_not_found() -> None:
    exc = le.NotFoundError(
        "The model 'nope' does not exist", model="nope", llm_provider="openai",
        response=response(404),
    )  # fmt: skip
    error = mapped(exc)
    assert error.status_code == 404
    assert error.code == "model_not_found"
    assert error.param == "model"


def test_contextgate_errors_pass_unchanged() -> None:
    original = UpstreamError("already mapped", status_code=503, code="x")
    assert mapped(original) is original


def test_anything_else_is_a_bad_gateway_not_a_crash() -> None:
    error = mapped(RuntimeError("boom"))
    assert error.status_code == 502
    assert error.code == "upstream_error"
    assert "boom" in error.message


@pytest.mark.parametrize("status", [400, 404, 429, 502, 504])
def test_every_mapped_error_is_openais_envelope(status: int) -> None:
    error = ContextGateError("m", status_code=status, code="c", param="p", error_type="t")
    assert envelope(error) == {"message": "m", "type": "t", "param": "p", "code": "c"}
    assert error_response(error).status_code == status


async def test_an_unexpected_exception_is_still_openais_envelope() -> None:
    from fastapi import FastAPI

    from app.core.errors import install_error_handlers

    application = FastAPI()
    install_error_handlers(application)

    @application.get("/boom")
    async def boom() -> None:
        raise RuntimeError("a bug")

    # raise_app_exceptions: the exception must not escape the app (the server would close the
    # client's keep-alive connection over it), it is answered inside
    transport = httpx.ASGITransport(app=application, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/boom")
    assert response.status_code == 500
    body = response.json()
    assert body["error"]["type"] == "server_error"
    assert body["error"]["code"] == "internal_error"
    assert "a bug" not in body["error"]["message"]


def test_stream_broken_off_mid_answer_is_not_reported_as_http_500() -> None:
    try:
        try:
            raise httpx.ReadError("Response payload is not completed")
        except httpx.ReadError as read_error:
            raise le.MidStreamFallbackError(
                message="litellm.APIConnectionError: Response payload is not completed",
                model=MODEL,
                llm_provider="openai",
            ) from read_error
    except le.MidStreamFallbackError as exc:
        error = mapped(exc)
    assert error.status_code == 502
    assert error.code == "upstream_error"
    assert "broke off" in error.message
    assert "HTTP 500" not in error.message


async def test_missing_provider_key_says_which_setting_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass-through model with no provider key fails inside litellm before any call."""
    from app.llm.client import LLMClient, RetryPolicy
    from app.llm.routing import ModelRouter

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient(ModelRouter(), retry=RetryPolicy(max_retries=0))
    with pytest.raises(UpstreamError) as caught:
        await client.complete("gpt-4o-mini", [{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 502
    assert caught.value.code == "upstream_credentials_missing"
    assert "OPENAI_API_KEY" in caught.value.message
