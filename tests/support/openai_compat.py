"""What tests/llm/test_openai_compat.py and test_openai_compat_stream.py share: the upstream's
address and wire bodies, the respx and ``LLMClient`` fixtures, and ``failure``.

A test module imports the fixtures by name (``from ... import llm as llm``), so that they stay
local to it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
import respx
from respx.mocks import AbstractRequestMocker

import app  # noqa: F401  (offline defaults before litellm)
from app.core.errors import ContextGateError
from app.llm.client import LLMClient, RetryPolicy
from app.llm.routing import ModelRouter

BASE = "http://upstream.test/v1"
URL = f"{BASE}/chat/completions"
MODEL = "local-llama"
KEY = "sk-upstream-unit"
MESSAGES = [{"role": "user", "content": "hello"}]
USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
            "choices": [choice], **extra}  # fmt: skip


def sse(*events: Any) -> bytes:
    lines = [e if isinstance(e, str) else "data: " + orjson.dumps(e).decode() for e in events]
    return ("\n\n".join(lines) + "\n\n").encode()


class HTTP1Mocker(AbstractRequestMocker):
    """respx at the door of the upstream pool (app/llm/http1.py), where its default mocker
    sits at httpcore's: the request as the pool gets it, the route's response as it returns
    it. Requests through the proxy path's ``httpx.AsyncClient`` are not intercepted."""

    name = "contextgate-http1"
    targets = ["app.llm.http1.HTTP1Transport"]
    target_methods = ["handle_async_request"]

    @classmethod
    def to_httpx_request(cls, **kwargs: Any) -> httpx.Request:
        request: httpx.Request = kwargs["request"]
        return request

    @classmethod
    async def from_async_httpx_response(
        cls, httpx_response: httpx.Response, target: object, **kwargs: Any
    ) -> httpx.Response:
        return httpx_response


@pytest.fixture
def upstream() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False, using=HTTP1Mocker.name) as router:
        yield router


@pytest.fixture
async def llm() -> AsyncIterator[Callable[..., LLMClient]]:
    clients: list[LLMClient] = []

    def build(retries: int = 0, **kwargs: Any) -> LLMClient:
        router = ModelRouter(upstream_base_url=BASE + "/", upstream_api_key=KEY)
        client = LLMClient(router, retry=RetryPolicy(max_retries=retries, backoff_s=0), **kwargs)
        clients.append(client)
        return client

    yield build
    for client in clients:
        await client.aclose()


async def failure(client: LLMClient, *, stream: bool = False) -> ContextGateError:
    call: Callable[..., Awaitable[Any]] = client.stream if stream else client.complete
    with pytest.raises(ContextGateError) as info:
        await call(MODEL, MESSAGES)
    return info.value
