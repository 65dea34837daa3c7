"""The OpenAI SDK fast path (app/llm/fastpath.py) must send exactly what the SDK would."""

from __future__ import annotations

from typing import Any

import pytest
from openai._types import omit
from openai._utils import async_maybe_transform
from openai.types.chat import completion_create_params as params

from app.llm import fastpath


def _body(messages: Any) -> dict[str, Any]:
    return {
        "messages": messages,
        "model": "gpt-4o-mini",
        "temperature": 0.2,
        "max_tokens": omit,
        "stream": False,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "stream_options": {"include_usage": True},
    }


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
        "reasoning_content": "thinking",
    },
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "user", "content": "thanks", "name": "bob"},
]


async def test_fast_transform_equals_the_sdk_transform() -> None:
    assert fastpath.install()
    from openai.resources.chat.completions import completions as module

    fast = module.async_maybe_transform  # type: ignore[attr-defined]
    assert getattr(fast, "__contextgate_fast__", False)
    for expected_type in (params.CompletionCreateParamsNonStreaming, params.CompletionCreateParams):
        original = await async_maybe_transform(_body(MESSAGES), expected_type)
        assert await fast(_body(MESSAGES), expected_type) == original
        assert "max_tokens" not in original  # omitted values are still dropped


async def test_non_json_messages_keep_the_sdk_path() -> None:
    fastpath.install()
    from openai.resources.chat.completions import completions as module

    messages = ({"role": "user", "content": "from a generator"} for _ in range(1))
    result = await module.async_maybe_transform(  # type: ignore[attr-defined]
        _body(messages), params.CompletionCreateParamsNonStreaming
    )
    assert result["messages"] == [{"role": "user", "content": "from a generator"}]


@pytest.mark.parametrize(
    ("value", "plain"),
    [({"a": [1, 2.0, None, True, "x"]}, True), ({"a": (1, 2)}, False), ({1: "x"}, False)],
)
def test_is_plain_json(value: Any, plain: bool) -> None:
    assert fastpath.is_plain_json(value) is plain


async def test_internal_call_marks_only_the_current_task() -> None:
    import asyncio

    import litellm
    from litellm._internal_context import is_internal_call

    fastpath.install()
    assert litellm.disable_streaming_logging is True

    async def in_request() -> bool:
        fastpath.internal_call()
        return is_internal_call.get()

    assert await asyncio.create_task(in_request()) is True
    assert is_internal_call.get() is False  # the caller's context is untouched


async def test_litellm_does_not_price_internal_calls() -> None:
    import asyncio

    from litellm.litellm_core_utils.litellm_logging import Logging

    fastpath.install()
    calculator = Logging.response_cost_calculator
    assert getattr(calculator, "__contextgate_fast__", False)

    async def in_request() -> object:
        fastpath.internal_call()
        return calculator(object(), result=None)  # type: ignore[arg-type]

    assert await asyncio.create_task(in_request()) is None
