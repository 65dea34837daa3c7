"""The fake upstream's Anthropic /v1/messages, driven by the real anthropic SDK."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from tests.fake_upstream import FakeUpstream

TOOL: Any = {
    "name": "get_weather",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture
def fake(fake_upstream: FakeUpstream) -> FakeUpstream:
    return fake_upstream


@pytest.fixture
def client(fake: FakeUpstream) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.url, api_key="sk-ant-test", max_retries=0)


def test_tool_loop_with_signed_thinking(client: anthropic.Anthropic) -> None:
    ask = {"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Paris"}'}
    first = client.messages.create(
        model="claude-x", max_tokens=2048, messages=[ask], tools=[TOOL], thinking=THINKING
    )
    assert [block.type for block in first.content] == ["thinking", "tool_use"]
    assert first.stop_reason == "tool_use"
    thinking, call = first.content
    assert call.type == "tool_use"
    assert call.input == {"city": "Paris"}
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}
    history: Any = [ask, {"role": "assistant", "content": [b.model_dump() for b in first.content]}]
    with client.messages.stream(
        model="claude-x", max_tokens=2048, tools=[TOOL], thinking=THINKING,
        messages=[*history, {"role": "user", "content": [result]}],
    ) as stream:  # fmt: skip
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[1].type == "text"
    assert final.content[1].text == "Tool results: sunny"
    assert final.content[0].type == "thinking"
    assert final.content[0].signature

    # A changed signature, or the thinking dropped from the loop: Anthropic's 400.
    tampered = [b.model_dump() for b in first.content]
    tampered[0]["thinking"] += " (edited)"
    for content in (tampered, [b.model_dump() for b in first.content][1:]):
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(
                model="claude-x", max_tokens=2048, tools=[TOOL], thinking=THINKING,
                messages=[
                    ask, {"role": "assistant", "content": content},
                    {"role": "user", "content": [result]},
                ],
            )  # fmt: skip
        assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


def test_cache_breakpoints_usage_and_limit(client: anthropic.Anthropic) -> None:
    cached: Any = [
        {"type": "text", "text": "You are terse. " * 50, "cache_control": {"type": "ephemeral"}}
    ]
    messages: Any = [{"role": "user", "content": "hi"}]
    first = client.messages.create(
        model="claude-x", max_tokens=64, system=cached, messages=messages
    )
    second = client.messages.create(
        model="claude-x", max_tokens=64, system=cached, messages=messages
    )
    assert first.usage.cache_creation_input_tokens
    assert not first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    five: Any = [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
        for i in range(5)
    ]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
        client.messages.create(model="claude-x", max_tokens=64, system=five, messages=messages)


def test_redacted_thinking_and_records(client: anthropic.Anthropic, fake: FakeUpstream) -> None:
    reply = client.messages.create(
        model="claude-x", max_tokens=2048, thinking=THINKING,
        messages=[{"role": "user", "content": "REDACTED_THINKING please"}],
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    )  # fmt: skip
    assert [block.type for block in reply.content] == ["thinking", "redacted_thinking", "text"]
    recorded = fake.requests()[-1]
    assert recorded["path"] == "/v1/messages"
    assert recorded["headers"]["anthropic-beta"] == "interleaved-thinking-2025-05-14"


def test_cache_entries_per_breakpoint_and_one_hour_writes(client: anthropic.Anthropic) -> None:
    system: Any = [
        {"type": "text", "text": "Long rules. " * 60,
         "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]  # fmt: skip
    ask: Any = [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]
    first = client.messages.create(
        model="claude-x", max_tokens=64, system=system, messages=[{"role": "user", "content": ask}]
    )
    creation = first.usage.cache_creation
    assert creation is not None
    assert creation.ephemeral_1h_input_tokens > 0
    assert creation.ephemeral_5m_input_tokens > 0
    assert first.usage.cache_creation_input_tokens == (
        creation.ephemeral_1h_input_tokens + creation.ephemeral_5m_input_tokens
    )
    # Another question after the same system prompt: the 1-hour entry is read back (its mark
    # is a breakpoint of this prompt too), the rest written for 5 minutes.
    other: Any = [{"type": "text", "text": "bye", "cache_control": {"type": "ephemeral"}}]
    second = client.messages.create(
        model="claude-x",
        max_tokens=64,
        system=system,
        messages=[{"role": "user", "content": other}],
    )
    assert second.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens < first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation is not None
    assert second.usage.cache_creation.ephemeral_1h_input_tokens == 0
    assert second.usage.cache_creation.ephemeral_5m_input_tokens > 0


def test_a_one_hour_breakpoint_after_a_five_minute_one_is_refused(
    client: anthropic.Anthropic,
) -> None:
    system: Any = [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]
    ask: Any = [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    with pytest.raises(anthropic.BadRequestError, match="must not come after"):
        client.messages.create(
            model="claude-x",
            max_tokens=64,
            system=system,
            messages=[{"role": "user", "content": ask}],
        )


def _loop(client: anthropic.Anthropic) -> tuple[Any, Any, str]:
    """One tool call, ready to be answered: (the ask, the assistant message, its tool_use id)."""
    ask: Any = {"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Oslo"}'}
    first = client.messages.create(model="claude-x", max_tokens=64, messages=[ask], tools=[TOOL])
    call = first.content[-1]
    assert call.type == "tool_use"
    return ask, {"role": "assistant", "content": [b.model_dump() for b in first.content]}, call.id


def test_tool_result_without_its_tool_use_is_refused(client: anthropic.Anthropic) -> None:
    ask, assistant, call_id = _loop(client)
    answered: Any = {"type": "tool_result", "tool_use_id": call_id, "content": "rain"}
    stray = {"type": "tool_result", "tool_use_id": "toolu_nowhere", "content": "rain"}
    # Accepted: the result answers the call of the message right before it.
    client.messages.create(
        model="claude-x", max_tokens=64, tools=[TOOL],
        messages=[ask, assistant, {"role": "user", "content": [answered]}],
    )  # fmt: skip
    refused: list[Any] = [
        [ask, assistant, {"role": "user", "content": [answered, stray]}],  # an unknown id
        [{"role": "user", "content": [answered]}],  # its tool_use is gone
        [  # its tool_use is two messages back, not in the previous message
            ask, assistant, {"role": "user", "content": [answered]},
            {"role": "assistant", "content": "Done."}, {"role": "user", "content": [answered]},
        ],
    ]  # fmt: skip
    for messages in refused:
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(model="claude-x", max_tokens=64, tools=[TOOL], messages=messages)
        error = caught.value.body["error"]  # type: ignore[index]
        assert error["type"] == "invalid_request_error"
        assert "unexpected `tool_use_id` found in `tool_result` blocks" in error["message"]


def test_tool_use_without_its_tool_result_is_refused(client: anthropic.Anthropic) -> None:
    ask, assistant, call_id = _loop(client)
    followings: list[Any] = ["Go on.", [{"type": "text", "text": "Go on."}]]
    for following in followings:
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(
                model="claude-x", max_tokens=64, tools=[TOOL],
                messages=[ask, assistant, {"role": "user", "content": following}],  # type: ignore[list-item]
            )  # fmt: skip
        error = caught.value.body["error"]  # type: ignore[index]
        assert error["type"] == "invalid_request_error"
        assert (
            f"`tool_use` ids were found without `tool_result` blocks immediately after: {call_id}"
            in error["message"]
        )


def test_usage_counts_the_prompt_at_the_token_scale() -> None:
    """The provider's count is tiktoken's times FAKE_UPSTREAM_TOKEN_SCALE (1.0 here)."""
    from tests.fake_upstream import anthropic as fake_anthropic
    from tests.fake_upstream.responses import _COUNTER

    text = "def handler(request): return response " * 200
    body: Any = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": text}]}
    used = fake_anthropic.usage(body, fake_anthropic.Reply(), set())
    assert used["input_tokens"] == _COUNTER.count_text(text, "gpt-4o") + 4


def test_context_management_needs_its_beta(client: anthropic.Anthropic) -> None:
    """As Anthropic: ``context_management`` is refused unless its beta is on (contextgate does
    the editing itself and must never send it); OpenAI's chat API refuses it outright."""
    ask: Any = [{"role": "user", "content": "hi"}]
    edits: Any = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    with pytest.raises(anthropic.BadRequestError, match="context_management"):
        client.messages.create(
            model="claude-x", max_tokens=64, messages=ask, extra_body={"context_management": edits}
        )
    compact: Any = {"edits": [{"type": "compact_20260112"}]}
    with pytest.raises(anthropic.BadRequestError, match="context_management"):
        client.beta.messages.create(
            model="claude-x", max_tokens=64, messages=ask, context_management=compact,
            betas=["context-management-2025-06-27"],
        )  # fmt: skip
    reply = client.beta.messages.create(
        model="claude-x", max_tokens=64, messages=ask, context_management=edits,
        betas=["context-management-2025-06-27"],
    )  # fmt: skip
    assert reply.content[0].type == "text"


def test_the_chat_api_refuses_context_management(fake: FakeUpstream) -> None:
    chat = openai.OpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="context_management"):
        chat.chat.completions.create(
            model="gpt-x",
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"context_management": {"edits": []}},
        )
