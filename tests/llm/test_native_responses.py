"""The native Responses path's pure parts: which deployments count as OpenAI, the chat form ⇄
Responses items, and the stream's typed events as chat chunks."""

from __future__ import annotations

from typing import Any

import pytest

from app.llm.native_responses import NativeRequest, native_route
from app.llm.responses_items import (
    NATIVE_BLOCK,
    chat_answer,
    event_chunk,
    input_items,
    without_native_blocks,
)
from app.llm.routing import Deployment, ModelRouter

REASONING = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAAB.x"}
SEARCH = {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {}}


@pytest.mark.parametrize(
    ("deployment", "mode", "native"),
    [
        (Deployment("gpt-5", "openai/gpt-5"), "auto", True),
        (Deployment("a", "azure/my-o4", {"api_base": "https://x.openai.azure.com"}), "auto", True),
        (Deployment("g", "openai/g", {"api_base": "https://api.openai.com/v1"}), "auto", True),
        # An OpenAI-compatible server (vLLM, CONTEXTGATE_UPSTREAM_BASE_URL): opt-in only.
        (Deployment("v", "openai/v", {"api_base": "http://vllm:8000/v1"}), "auto", False),
        (Deployment("v", "openai/v", {"api_base": "http://vllm:8000/v1"}), "always", True),
        (
            Deployment("v", "openai/v", {"api_base": "http://x/v1"}, {"responses_api": True}),
            "off",
            True,
        ),
        (Deployment("g", "openai/gpt-5", model_info={"responses_api": False}), "auto", False),
        (Deployment("gpt-5", "openai/gpt-5"), "off", False),
        (Deployment("c", "anthropic/claude-sonnet-4-5"), "always", False),
        (Deployment("c", "claude-x", {"custom_llm_provider": "anthropic"}), "always", False),
    ],
)
def test_which_deployments_go_native(deployment: Deployment, mode: Any, native: bool) -> None:
    assert native_route(deployment, mode) is native


def test_request_takes_what_the_responses_api_knows() -> None:
    request = NativeRequest.of(
        {
            "model": "o4-mini",
            "input": "hi",
            "include": ["reasoning.encrypted_content"],
            "tools": [{"type": "web_search"}],
            "max_output_tokens": 50,
            "prompt_cache_key": "k",
            "conversation_id": "conv_x",
            "api_base": "http://evil",
        }
    )
    assert request.wants_encrypted_reasoning
    assert request.tools == [{"type": "web_search"}]
    assert request.params == {"max_output_tokens": 50, "prompt_cache_key": "k"}


def test_answer_keeps_every_provider_item_verbatim() -> None:
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "f",
        "arguments": "{}",
    }
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Found", "annotations": []}],
    }
    answer = chat_answer([REASONING, SEARCH, message, call])
    assert answer["content"] == "Found"
    assert answer["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ]
    assert answer["thinking_blocks"] == [
        {"type": NATIVE_BLOCK, "item": REASONING},
        {"type": NATIVE_BLOCK, "item": SEARCH},
    ]
    # Sent back: the items first, as they came, then the text and the call.
    assert input_items([answer]) == [
        REASONING,
        SEARCH,
        {"type": "message", "role": "assistant", "content": "Found"},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
    ]


def test_input_items_of_a_managed_prompt() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:x", "detail": "low"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    ]
    assert input_items(messages) == [
        {"type": "message", "role": "system", "content": "Be brief."},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:x", "detail": "low"},
            ],
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "42"},
    ]


def test_reasoning_that_led_nowhere_is_not_sent() -> None:
    cut = {"role": "assistant", "content": None, "thinking_blocks": [chat_block(REASONING)]}
    assert input_items([cut]) == []


def test_chat_form_never_sees_native_blocks() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    messages = [
        {"role": "assistant", "content": "a", "thinking_blocks": [chat_block(REASONING)]},
        {"role": "assistant", "content": "b", "thinking_blocks": [thinking]},
    ]
    assert without_native_blocks(messages) == [
        {"role": "assistant", "content": "a"},
        {"role": "assistant", "content": "b", "thinking_blocks": [thinking]},
    ]


def test_stream_events_as_chunks() -> None:
    calls: list[str] = []
    text = event_chunk({"type": "response.output_text.delta", "delta": "Hi"}, calls)
    assert text["choices"][0]["delta"] == {"content": "Hi"}
    assert text["responses_event"]["delta"] == "Hi"
    done = event_chunk({"type": "response.output_item.done", "item": REASONING}, calls)
    assert done["choices"][0]["delta"] == {"thinking_blocks": [chat_block(REASONING)]}
    call = {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f", "arguments": "{}"}
    called = event_chunk({"type": "response.output_item.done", "item": call}, calls)
    assert called["choices"][0]["delta"]["tool_calls"][0]["index"] == 0
    usage = {
        "input_tokens": 10,
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 2},
    }
    final = event_chunk(
        {"type": "response.completed", "response": {"status": "completed", "usage": usage}}, calls
    )
    assert final["choices"][0]["finish_reason"] == "stop"
    assert final["usage"]["prompt_tokens"] == 10
    assert final["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}
    cut = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    incomplete = event_chunk({"type": "response.incomplete", "response": cut}, calls)
    assert incomplete["choices"][0]["finish_reason"] == "length"


def chat_block(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": NATIVE_BLOCK, "item": item}


def test_candidates_name_the_whole_chain_without_moving_the_round_robin() -> None:
    one, two = Deployment("m", "openai/a"), Deployment("m", "openai/b")
    backup = Deployment("backup", "anthropic/claude")
    router = ModelRouter([one, two, backup], fallbacks={"m": ["backup"]})
    assert router.candidates("m") == [one, two, backup]
    assert router.candidates("m") == [one, two, backup]
    assert [d.litellm_model for d in router.resolve("m")][:2] == ["openai/a", "openai/b"]
    assert router.candidates("unknown") == []
