"""The Anthropic door on the real server (``contextgate serve``), driven by the anthropic SDK.

Two models: ``claude-fake`` goes through litellm's anthropic provider to the fake upstream's
Anthropic /v1/messages (which checks thinking signatures); ``gpt-4o-mini`` goes to its
OpenAI-compatible chat API (the answer translated back to Anthropic's shape).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.models import ANTHROPIC_LITELLM_MODEL, fake_model_list
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

CLAUDE = "claude-fake"
CHAT_MODEL = "gpt-4o-mini"
MAX_BODY = 300_000
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}
TOOL: Any = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    config = fake_model_list(
        tmp_path_factory.mktemp("models"), fake_upstream_server, names=(), anthropic=(CLAUDE,)
    )
    yield from module_server(
        tmp_path_factory,
        fake_upstream_server,
        {"CONTEXTGATE_CONFIG": str(config), "CONTEXTGATE_MAX_BODY_BYTES": str(MAX_BODY)},
        name="messages",
    )


@pytest.fixture
def client(server: ContextgateServer, fake_upstream: FakeUpstream) -> Iterator[anthropic.Anthropic]:
    sdk = anthropic.Anthropic(base_url=server.url, api_key="sk-any", max_retries=0, timeout=30)
    yield sdk
    sdk.close()


@pytest.fixture
def http(server: ContextgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def stored(http: httpx.Client, conversation_id: str) -> list[dict[str, Any]]:
    response = http.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def conversation_count(http: httpx.Client) -> int:
    response = http.get("/v1/conversations", params={"limit": 100})
    assert response.status_code == 200, response.text
    return len(response.json()["data"])


def anthropic_calls(fake: FakeUpstream) -> list[dict[str, Any]]:
    return [r for r in fake.requests() if r["path"] == "/v1/messages"]


def test_create_on_both_kinds_of_upstream(client: anthropic.Anthropic) -> None:
    for model in (CLAUDE, CHAT_MODEL):
        raw = client.messages.with_raw_response.create(
            model=model,
            max_tokens=256,
            system="Be brief.",
            messages=[{"role": "user", "content": f"hello {model}"}],
        )
        reply = raw.parse()
        assert reply.type == "message"
        assert reply.id.startswith("msg_")
        assert reply.role == "assistant"
        assert reply.model == model
        assert [block.type for block in reply.content] == ["text"]
        assert reply.content[0].type == "text"
        assert reply.content[0].text == f"Echo: hello {model}"
        assert reply.stop_reason == "end_turn"
        assert reply.usage.input_tokens > 0
        assert reply.usage.output_tokens > 0
        extra = reply.model_extra or {}
        assert extra["context_utilization"]["model_name"] == model
        assert raw.headers["x-conversation-id"] == extra["conversation_id"]


def test_stream_events_as_the_sdk_expects(
    client: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    for model in (CHAT_MODEL, CLAUDE):
        with client.messages.stream(
            model=model,
            max_tokens=256,
            messages=[{"role": "user", "content": "stream these words please"}],
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert text == "Echo: stream these words please"
        assert final.stop_reason == "end_turn"
        assert final.usage.output_tokens > 0
        assert final.id.startswith("msg_")
        assert stream.response.headers["x-conversation-id"].startswith("conv_")


def test_tool_loop_with_thinking_and_full_history(
    client: anthropic.Anthropic, http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    """Claude Code's way: the whole history every call, thinking signed by the upstream."""
    ask: Any = {"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Paris"}'}
    first = client.messages.with_raw_response.create(
        model=CLAUDE, max_tokens=2048, thinking=THINKING, tools=[TOOL], messages=[ask]
    )
    reply = first.parse()
    assert [block.type for block in reply.content] == ["thinking", "tool_use"]
    assert reply.stop_reason == "tool_use"
    thinking, call = reply.content
    assert thinking.type == "thinking"
    assert thinking.signature
    assert call.type == "tool_use"
    assert call.input == {"city": "Paris"}
    conversation_id = first.headers["x-conversation-id"]

    assistant: Any = {"role": "assistant", "content": [b.model_dump() for b in reply.content]}
    result: Any = {"type": "tool_result", "tool_use_id": call.id, "content": "sunny, 21 C"}
    history = [ask, assistant, {"role": "user", "content": [result]}]
    with client.messages.stream(
        model=CLAUDE, max_tokens=2048, thinking=THINKING, tools=[TOOL], messages=history
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.content[-1].type == "text"
    assert final.content[-1].text == "Tool results: sunny, 21 C"
    kinds = [event.type for event in events]
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    deltas = {e.delta.type for e in events if e.type == "content_block_delta"}
    assert {"thinking_delta", "signature_delta", "text_delta"} <= deltas

    # The upstream got the thinking block back byte-for-byte (else it would have said 400).
    second_call = anthropic_calls(fake_upstream)[-1]["body"]
    sent_assistant = second_call["messages"][1]["content"]
    assert sent_assistant[0] == thinking.model_dump()

    # One stored conversation: user, assistant (thinking kept), tool result, answer.
    messages = stored(http, conversation_id)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["id"] == call.id

    # A third call continuing by full history also lands in the same conversation.
    history += [
        {"role": "assistant", "content": [b.model_dump() for b in final.content]},
        {"role": "user", "content": "thanks"},
    ]
    third = client.messages.with_raw_response.create(
        model=CLAUDE, max_tokens=2048, thinking=THINKING, tools=[TOOL], messages=history
    )
    assert third.headers["x-conversation-id"] == conversation_id
    assert len(stored(http, conversation_id)) == 6


def test_tool_loop_streamed_on_a_chat_upstream(client: anthropic.Anthropic) -> None:
    ask: Any = {"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Oslo"}'}
    with client.messages.stream(
        model=CHAT_MODEL, max_tokens=256, tools=[TOOL], messages=[ask]
    ) as stream:
        first = stream.get_final_message()
        conversation_id = stream.response.headers["x-conversation-id"]
    assert first.stop_reason == "tool_use"
    call = first.content[-1]
    assert call.type == "tool_use"
    assert call.name == "get_weather"
    assert call.input == {"city": "Oslo"}
    result: Any = {"type": "tool_result", "tool_use_id": call.id, "content": "snow"}
    second = client.messages.with_raw_response.create(
        model=CHAT_MODEL,
        max_tokens=256,
        tools=[TOOL],
        messages=[
            ask,
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {"role": "user", "content": [result]},
        ],
    )
    assert second.headers["x-conversation-id"] == conversation_id
    answer = second.parse()
    assert answer.content[0].type == "text"
    assert answer.content[0].text == "Tool results: snow"


def test_count_tokens_stores_nothing(client: anthropic.Anthropic, http: httpx.Client) -> None:
    before = conversation_count(http)
    short = client.messages.count_tokens(model=CLAUDE, messages=[{"role": "user", "content": "hi"}])
    long = client.messages.count_tokens(
        model=CLAUDE,
        system="You are a careful assistant.",
        tools=[TOOL],
        messages=[{"role": "user", "content": "hi " * 200}],
    )
    assert 0 < short.input_tokens < long.input_tokens
    assert long.input_tokens > 200
    assert conversation_count(http) == before


def test_bad_input_is_refused_in_anthropics_envelope(
    http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    before = conversation_count(http)
    cases: list[Any] = [
        {"model": CLAUDE, "messages": [{"role": "user", "content": "no max_tokens"}]},
        {
            "model": CLAUDE,
            "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": "text"}]}],
        },
        {"model": CLAUDE, "max_tokens": 10, "messages": []},
        {"model": CLAUDE, "max_tokens": 10, "messages": [{"role": "tool", "content": "x"}]},
    ]
    for body in cases:
        response = http.post("/v1/messages", json=body)
        assert response.status_code == 400, response.text
        error = response.json()
        assert error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
        assert error["error"]["message"]
    not_json = http.post(
        "/v1/messages", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert not_json.status_code == 400
    assert not_json.json()["type"] == "error"
    huge = {
        "model": CLAUDE,
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "x" * MAX_BODY}],
    }
    too_large = http.post("/v1/messages", json=huge)
    assert too_large.status_code == 413
    assert too_large.json()["error"]["type"] == "request_too_large"
    assert conversation_count(http) == before
    assert anthropic_calls(fake_upstream) == []


def test_upstream_errors_keep_the_envelope(
    client: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    upstream_name = ANTHROPIC_LITELLM_MODEL.removeprefix("anthropic/")  # what litellm sends
    fake_upstream.faults(upstream_name, [{"status": 429, "message": "slow down"}])
    fake_upstream.faults(CHAT_MODEL, [{"status": 503}])
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(
            model=CLAUDE, max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert limited.value.body["type"] == "error"  # type: ignore[index]
    assert limited.value.body["error"]["message"].endswith(": slow down")  # type: ignore[index]
    with pytest.raises(anthropic.APIStatusError) as failed:
        client.messages.create(
            model=CHAT_MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert failed.value.status_code >= 500
    assert failed.value.body["type"] == "error"  # type: ignore[index]


def test_anthropic_headers_reach_an_anthropic_upstream(
    http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    beta = "interleaved-thinking-2025-05-14"
    response = http.post(
        "/v1/messages",
        json={"model": CLAUDE, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]},
        headers={"anthropic-version": "2023-06-01", "anthropic-beta": beta},
    )
    assert response.status_code == 200, response.text
    headers = anthropic_calls(fake_upstream)[-1]["headers"]
    assert beta in headers["anthropic-beta"]
    assert headers["anthropic-version"] == "2023-06-01"


def _marked_last(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    blocks = [dict(block) for block in blocks]
    blocks[-1]["cache_control"] = {"type": "ephemeral"}
    return {**message, "content": blocks}


def _breakpoints(body: dict[str, Any]) -> list[int]:
    """Indexes of the upstream messages that carry a cache_control breakpoint."""
    marked = []
    for index, message in enumerate(body["messages"]):
        blocks = message["content"] if isinstance(message["content"], list) else []
        if any("cache_control" in json.dumps(block) for block in blocks):
            marked.append(index)
    return marked


def test_moving_breakpoint_is_not_accumulated(
    client: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    """Claude Code marks its newest message on every call; stored history must not keep the
    old marks (Anthropic refuses more than 4). contextgate adds one where the previous prompt,
    kept as this one's prefix, ends (where the provider's cache entry is)."""
    system: Any = [
        {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}
    ]
    history: list[Any] = [{"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "A"}'}]
    previous_length = 0
    for step in range(6):
        sent = [*history[:-1], _marked_last(history[-1])]
        reply = client.messages.create(
            model=CLAUDE, max_tokens=2048, thinking=THINKING, tools=[TOOL], system=system,
            messages=sent,
        )  # fmt: skip
        body = anthropic_calls(fake_upstream)[-1]["body"]
        marks = _breakpoints(body)
        assert marks[-1] == len(body["messages"]) - 1  # where the client put it
        assert marks[:-1] == ([previous_length - 1] if previous_length else [])
        previous_length = len(body["messages"])
        history.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        call = next((b for b in reply.content if b.type == "tool_use"), None)
        if call is None:
            history.append(
                {"role": "user", "content": f'CALL_TOOL:get_weather:{{"city": "{step}"}}'}
            )
        else:
            result = {"type": "tool_result", "tool_use_id": call.id, "content": f"r{step}"}
            history.append({"role": "user", "content": [result]})
