"""Reasoning goes back upstream exactly where the provider needs it, on the chat door.

The fake upstream's "*thinker*" models answer with signed thinking blocks (litellm's shape for
Anthropic) and reasoning_content; the assistant messages of the current tool loop must carry
them back byte-for-byte, older turns' must not, and all of it stays stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fake_upstream import FakeUpstream
from tests.fake_upstream.responses import sign
from tests.support.e2e import WEATHER_TOOL, module_server, sse_events
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "claude-thinker"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(tmp_path_factory, fake_upstream_server, name="reasoning")


@pytest.fixture
def http(server: ContextgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def _unmarked(value: Any) -> Any:
    """Prompt-cache marks aside (a mark turns a string content into one marked text part)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        if len(value) == 1 and isinstance(value[0], dict) and value[0].get("type") == "text":
            return value[0]["text"]
        return [_unmarked(v) for v in value]
    return value


def upstream_messages(fake: FakeUpstream) -> list[list[dict[str, Any]]]:
    return [r["body"]["messages"] for r in fake.requests() if r["path"].endswith("/completions")]


def ask(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    body = {"model": MODEL, "tools": [WEATHER_TOOL], **body}
    if body.get("stream"):
        response = http.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        events = sse_events(response)
        return {"conversation_id": events[-2]["conversation_id"], "events": events}
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.mark.parametrize("stream", [False, True])
def test_tool_loop_resends_signed_thinking_and_only_within_the_loop(
    http: httpx.Client, fake_upstream: FakeUpstream, stream: bool
) -> None:
    question = 'CALL_TOOL:get_weather:{"city": "Oslo"}'
    first = ask(http, {"messages": [{"role": "user", "content": question}], "stream": stream})
    conversation_id = first["conversation_id"]
    stored = http.get(f"/v1/conversations/{conversation_id}").json()["messages"]
    thinking = f"Thinking about: {question[:50]}"
    expected_blocks = [{"type": "thinking", "thinking": thinking, "signature": sign(thinking)}]
    assert stored[1]["thinking_blocks"] == expected_blocks
    call_id = stored[1]["tool_calls"][0]["id"]

    # The client continues by id with only its tool result: the stored thinking goes back.
    tool_result = {"role": "tool", "tool_call_id": call_id, "content": "sunny, 21 C"}
    ask(http, {"messages": [tool_result], "conversation_id": conversation_id, "stream": stream})
    loop_call = upstream_messages(fake_upstream)[-1]
    assistant = [m for m in loop_call if m["role"] == "assistant"]
    assert assistant[-1]["thinking_blocks"] == expected_blocks
    assert assistant[-1]["reasoning_content"] == thinking

    # A new user message starts a new loop; the earlier turn's reasoning stays stored.
    ask(
        http,
        {
            "messages": [{"role": "user", "content": "thanks"}],
            "conversation_id": conversation_id,
            "stream": stream,
        },
    )
    loop_prompt, next_call = upstream_messages(fake_upstream)[-2:]
    # The prompt owner appends: the finished loop goes on as it was sent (its thinking
    # included, byte for byte), and the new turn's answer is the only one without it.
    assert _unmarked(next_call[: len(loop_prompt)]) == _unmarked(loop_prompt)
    final_answer = next_call[len(loop_prompt)]
    assert final_answer["role"] == "assistant"
    assert "thinking_blocks" not in final_answer
    assert "reasoning_content" not in final_answer
    stored = http.get(f"/v1/conversations/{conversation_id}").json()["messages"]
    assert stored[1]["thinking_blocks"] == expected_blocks
    assert [m["role"] for m in stored] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]


def test_full_history_client_gets_stored_thinking_back(
    http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    """A client that resends the whole history without the thinking blocks (as plain OpenAI
    clients do) continues the stored conversation, and the stored blocks go upstream."""
    question = 'CALL_TOOL:get_weather:{"city": "Rome"}'
    user = {"role": "user", "content": question}
    first = ask(http, {"messages": [user]})
    answer = first["choices"][0]["message"]
    echoed = {"role": "assistant", "content": answer["content"], "tool_calls": answer["tool_calls"]}
    # Echo the arguments with other spacing, as a door that parsed them would.
    echoed["tool_calls"][0]["function"]["arguments"] = '{ "city" : "Rome" }'
    tool_result = {"role": "tool", "tool_call_id": answer["tool_calls"][0]["id"], "content": "rain"}
    second = ask(http, {"messages": [user, echoed, tool_result]})
    assert second["conversation_id"] == first["conversation_id"]
    loop_call = upstream_messages(fake_upstream)[-1]
    thinking = f"Thinking about: {question[:50]}"
    assert loop_call[1]["thinking_blocks"] == [
        {"type": "thinking", "thinking": thinking, "signature": sign(thinking)}
    ]
    stored = http.get(f"/v1/conversations/{first['conversation_id']}").json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
