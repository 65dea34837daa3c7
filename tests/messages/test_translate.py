"""Anthropic request → internal turn (chat form) and chat answer → Anthropic content."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.conversations.fingerprint import content_hash
from app.messages.schemas import MessagesRequest
from app.messages.translate import (
    anthropic_content,
    anthropic_usage,
    chat_messages,
    stop_reason,
    to_turn_request,
)

SIGNED = {"type": "thinking", "thinking": "Let me look.\n", "signature": "sig==/+abc"}
REDACTED = {"type": "redacted_thinking", "data": "EuYBCkQYAiJA..."}
CC = {"type": "ephemeral"}


def request(**fields: Any) -> MessagesRequest:
    body: dict[str, Any] = {"model": "claude", "max_tokens": 100, "messages": []}
    body.update(fields)
    return MessagesRequest.model_validate(body)


def test_system_text_blocks_and_tool_loop_in_chat_form() -> None:
    body = request(
        system=[
            {"type": "text", "text": "Be brief."},
            {"type": "text", "text": "Tools!", "cache_control": CC},
        ],
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    SIGNED,
                    REDACTED,
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "sunny",
                        "is_error": False,
                    },
                    {"type": "text", "text": "and tomorrow?", "cache_control": CC},
                ],
            },
        ],
    )
    messages = chat_messages(body)
    assert messages[0] == {
        "role": "system",
        "content": [
            {"type": "text", "text": "Be brief."},
            {"type": "text", "text": "Tools!", "cache_control": CC},
        ],
    }
    assert messages[1] == {"role": "user", "content": "weather?"}
    assistant = messages[2]
    assert assistant["content"] == "Checking."
    assert assistant["thinking_blocks"] == [SIGNED, REDACTED]  # byte-for-byte, in order
    assert assistant["reasoning_content"] == "Let me look.\n"
    assert assistant["tool_calls"] == [
        {
            "id": "toolu_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    # tool_result first (chat needs it right after the call), then the user's text
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    assert messages[4] == {
        "role": "user",
        "content": [{"type": "text", "text": "and tomorrow?", "cache_control": CC}],
    }


def test_images_documents_tool_result_blocks_and_errors() -> None:
    body = request(
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"},
                    },
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://x.test/a.png"},
                        "cache_control": CC,
                    },
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "boom"}],
                        "cache_control": CC,
                    }
                ],
            },
        ]
    )
    user, assistant, tool = chat_messages(body)
    assert user["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}, "cache_control": CC},
        {"type": "text", "text": "doc"},
    ]
    assert assistant["content"] is None
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    # the block's cache_control goes on its last part, where litellm reads it
    assert tool == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": [{"type": "text", "text": "boom", "cache_control": CC}],
        "is_error": True,
    }


def test_request_parameters_map_to_the_turn() -> None:
    turn = to_turn_request(
        request(
            messages=[{"role": "user", "content": "hi"}],
            tools=[
                {
                    "name": "get_weather",
                    "description": "Weather",
                    "input_schema": {"type": "object"},
                    "cache_control": CC,
                }
            ],
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
            stop_sequences=["END"],
            temperature=0.5,
            top_p=0.9,
            top_k=5,
            thinking={"type": "enabled", "budget_tokens": 50},
            metadata={"user_id": "alice"},
            stream=True,
            conversation_id="conv_1",
        )
    )
    params = turn.forwarded_params()
    assert turn.model == "claude"
    assert turn.stream
    assert turn.include_usage
    assert turn.conversation_id == "conv_1"
    assert turn.user == "alice"
    assert params["max_tokens"] == 100
    assert params["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object"},
                "description": "Weather",
            },
            "cache_control": CC,
        }
    ]
    assert params["tool_choice"] == "required"
    assert params["parallel_tool_calls"] is False
    assert params["stop"] == ["END"]
    assert (params["temperature"], params["top_p"], params["top_k"]) == (0.5, 0.9, 5)
    assert params["thinking"] == {"type": "enabled", "budget_tokens": 50}
    named = to_turn_request(
        request(
            messages=[{"role": "user", "content": "x"}], tool_choice={"type": "tool", "name": "ls"}
        )
    )
    assert named.forwarded_params()["tool_choice"] == {
        "type": "function",
        "function": {"name": "ls"},
    }


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"max_tokens": None}, "max_tokens"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "system", "content": "x"}]}, "role"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}],
                    }
                ]
            },
            "tool_use",
        ),
        ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "text"),
        (
            {
                "messages": [
                    {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}
                ]
            },
            "signature",
        ),
        ({"tool_choice": {"type": "tool"}}, "name"),
        ({"thinking": {"type": "enabled", "budget_tokens": 500}}, "budget_tokens"),
        ({"temperature": 3}, "temperature"),
    ],
)
def test_bad_requests_are_refused(fields: dict[str, Any], where: str) -> None:
    body: dict[str, Any] = {
        "model": "claude",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "x"}],
    }
    body.update(fields)
    body = {k: v for k, v in body.items() if v is not None}
    with pytest.raises(ValidationError) as caught:
        MessagesRequest.model_validate(body)
    assert where in str(caught.value)


def test_echoed_answer_hashes_like_the_stored_one() -> None:
    """An answer's tool_use comes back as an object; it must match what was stored."""
    stored = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "f", "arguments": '{"b": 1, "a": "é"}'},
            }
        ],
    }
    echoed = chat_messages(
        request(messages=[{"role": "assistant", "content": [SIGNED, *anthropic_content(stored)]}])
    )[0]
    assert content_hash(echoed) == content_hash(stored)
    with_breakpoint = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "u"}, "cache_control": CC}],
    }
    without = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}
    assert content_hash(with_breakpoint) == content_hash(without)


def test_answer_blocks_thinking_first_then_text_then_tool_use() -> None:
    message = {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "Let me look.\n",
        "thinking_blocks": [SIGNED, REDACTED],
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "f", "arguments": '{"x": [1]}'},
            }
        ],
    }
    assert anthropic_content(message) == [
        SIGNED,
        REDACTED,
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "call_1", "name": "f", "input": {"x": [1]}},
    ]
    # a reasoner that is not Anthropic: its reasoning as an unsigned thinking block
    assert anthropic_content({"role": "assistant", "content": "4", "reasoning_content": "2+2"})[
        0
    ] == {
        "type": "thinking",
        "thinking": "2+2",
        "signature": "",
    }


def test_unsigned_thinking_goes_back_as_reasoning_only() -> None:
    unsigned = {"type": "thinking", "thinking": "2+2", "signature": ""}
    (assistant,) = chat_messages(
        request(
            messages=[{"role": "assistant", "content": [unsigned, {"type": "text", "text": "4"}]}]
        )
    )
    assert "thinking_blocks" not in assistant
    assert assistant["reasoning_content"] == "2+2"


def test_stop_reasons_and_usage() -> None:
    assert stop_reason("stop") == "end_turn"
    assert stop_reason("length") == "max_tokens"
    assert stop_reason("tool_calls") == "tool_use"
    assert stop_reason("stop", has_tool_calls=True) == "tool_use"
    assert stop_reason("content_filter") == "refusal"
    usage = anthropic_usage(
        {
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60},
            "cache_creation_input_tokens": 30,
        }
    )
    assert usage == {
        "input_tokens": 10,
        "output_tokens": 7,
        "cache_read_input_tokens": 60,
        "cache_creation_input_tokens": 30,
        "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 0},
    }
