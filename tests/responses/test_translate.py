"""Responses ⇄ chat translation, checked against the openai SDK's own pydantic types."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response, ResponseInputItem
from pydantic import TypeAdapter, ValidationError

from app.conversations.fingerprint import content_hash
from app.core.errors import BadRequest
from app.llm.responses import Usage
from app.responses.objects import echo_fields, response_object
from app.responses.schemas import ResponsesRequest
from app.responses.translate import (
    chat_messages,
    chat_params,
    decode_reasoning,
    encode_reasoning,
    input_items,
    output_items,
    response_usage,
)

THINKING = [
    {"type": "thinking", "thinking": 'Let me think… \u00e9\u2028 "quoted"', "signature": "sig+/=="},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
]


def request(**fields: Any) -> ResponsesRequest:
    return ResponsesRequest.model_validate({"model": "m", **fields})


def test_a_string_input_with_instructions_is_system_then_user() -> None:
    body = request(input="hello", instructions="Be brief.")
    assert chat_messages(body) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello"},
    ]


def test_items_become_one_assistant_message_per_run_and_tool_messages() -> None:
    body = request(
        input=[
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "hm"}],
                "encrypted_content": encode_reasoning(THINKING),
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {"role": "user", "content": "thanks"},
        ]
    )
    messages = chat_messages(body)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assistant = messages[1]
    assert assistant["content"] == "Checking."
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    assert assistant["reasoning_content"] == "hm"
    assert assistant["thinking_blocks"] == THINKING  # byte-for-byte through encrypted_content
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


def test_an_echoed_answer_hashes_like_the_stored_one() -> None:
    """A client that resends the output items continues the same stored conversation."""
    answer = {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
        "reasoning_content": "r",
        "thinking_blocks": THINKING,
    }
    items = output_items(answer)
    assert [i["type"] for i in items] == ["reasoning", "message", "function_call"]
    rebuilt = chat_messages(request(input=items))
    assert len(rebuilt) == 1
    assert content_hash(rebuilt[0]) == content_hash(answer)
    assert rebuilt[0]["thinking_blocks"] == THINKING


def test_output_items_and_the_response_validate_as_openais_types() -> None:
    body = request(
        input="hi",
        tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        metadata={"k": "v"},
        reasoning={"effort": "low"},
    )
    items = output_items(
        {
            "role": "assistant",
            "content": "ok",
            "reasoning_content": "why",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
        }
    )
    usage = response_usage(
        Usage(
            10,
            5,
            {
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 2},
            },
        )
    )
    payload = response_object(
        response_id="resp_1",
        created_at=1,
        echo=echo_fields(body),
        status="completed",
        output=items,
        usage=usage,
        conversation_id="conv_1",
        context_utilization={"tokens_used": 3},
    )
    parsed = Response.model_validate(payload)
    assert parsed.output_text == "ok"
    assert parsed.usage is not None
    assert parsed.usage.input_tokens_details.cached_tokens == 4
    assert parsed.usage.output_tokens_details.reasoning_tokens == 2
    extra = parsed.model_extra or {}
    assert extra["conversation_id"] == "conv_1"
    assert extra["context_utilization"] == {"tokens_used": 3}
    assert [item.id[:3] for item in parsed.output] == ["rs_", "msg", "fc_"]


def test_input_items_list_back_as_openais_items() -> None:
    body = request(
        input=[
            {"role": "user", "content": "plain"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ]
    )
    items = input_items(body)
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseInputItem)
    for item in items:
        adapter.validate_python(item)
        assert item["id"]
    assert items[0]["content"] == [{"type": "input_text", "text": "plain"}]


def test_params_translate_tools_choice_format_and_limits() -> None:
    body = request(
        input="x",
        tools=[
            {
                "type": "function",
                "name": "f",
                "description": "d",
                "parameters": {"type": "object"},
                "strict": True,
            }
        ],
        tool_choice={"type": "function", "name": "f"},
        max_output_tokens=50,
        temperature=0.2,
        top_p=0.9,
        parallel_tool_calls=False,
        reasoning={"effort": "high"},
        text={"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}}},
        user="alice",
        store=True,
        stream=True,
    )
    params = chat_params(body)
    assert params["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object"},
                "strict": True,
            },
        }
    ]
    assert params["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert params["max_tokens"] == 50
    assert params["reasoning_effort"] == "high"
    assert params["response_format"]["json_schema"]["name"] == "s"
    assert params["stream_options"] == {"include_usage": True}
    assert (params["temperature"], params["top_p"], params["user"]) == (0.2, 0.9, "alice")
    assert params["parallel_tool_calls"] is False
    assert "metadata" not in params


@pytest.mark.parametrize(
    "fields",
    [
        {"input": [{"type": "web_search_call", "id": "ws"}]},
        {"input": [{"role": "robot", "content": "x"}]},
        {"input": [{"type": "function_call_output", "output": "no call id"}]},
        {"input": "x", "max_output_tokens": 0},
        {"input": "x", "temperature": 3},
        {"input": 5},
    ],
)
def test_bad_requests_fail_validation(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        request(**fields)


def test_namespaces_are_flattened_and_hosted_tools_left_out() -> None:
    tools = [
        {"type": "function", "name": "a"},
        {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "b"}]},
        {"type": "web_search", "external_web_access": False},
    ]
    params = chat_params(request(input="x", tools=tools, tool_choice="auto"))
    assert [tool["function"]["name"] for tool in params["tools"]] == ["a", "b"]
    hosted_only = chat_params(
        request(
            input="x", tools=[{"type": "web_search"}], tool_choice="auto", parallel_tool_calls=True
        )
    )
    assert "tools" not in hosted_only
    assert "tool_choice" not in hosted_only
    assert "parallel_tool_calls" not in hosted_only
    with pytest.raises(BadRequest):
        chat_params(request(input="x", tools=[{"type": "function"}]))


def test_unsupported_tool_choice_is_a_bad_request() -> None:
    with pytest.raises(BadRequest):
        chat_params(
            request(
                input="x",
                tools=[{"type": "function", "name": "f"}],
                tool_choice={"type": "file_search"},
            )
        )


def test_foreign_encrypted_content_is_ignored() -> None:
    assert decode_reasoning("gAAAAABo-opaque-from-openai") is None
    assert decode_reasoning("cg1:not base64 !!") is None
    assert decode_reasoning(encode_reasoning(THINKING)) == THINKING


def test_truncation_and_metadata_are_echoed_not_forwarded() -> None:
    """contextgate always fits the history into the budget, so ``truncation`` changes nothing
    it sends; the response echoes it (OpenAI's default ``disabled`` when absent), as it echoes
    ``metadata``, and a value OpenAI does not know is refused."""
    body = request(input="x", truncation="auto", metadata={"ticket": "T-1"})
    assert "truncation" not in chat_params(body)
    echoed = echo_fields(body)
    assert echoed["truncation"] == "auto"
    assert echoed["metadata"] == {"ticket": "T-1"}
    assert echo_fields(request(input="x"))["truncation"] == "disabled"
    with pytest.raises(ValidationError):
        request(input="x", truncation="sometimes")
