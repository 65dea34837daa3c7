"""The OpenAI Agents SDK (``openai-agents``) end to end: an ``Agent`` with a function tool, on
``OpenAIResponsesModel`` whose client's base URL is a running contextgate, against the fake
upstream (which calls the tool, then answers with its result).

``Runner.run`` resends the whole run as input on its second call; ``Runner.run_streamed`` with
``auto_previous_response_id`` continues by ``previous_response_id`` with only the tool output.
Both must run the tool, end with the answer, and leave one stored conversation holding the
tool call and its result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "gpt-4o-mini"
INSTRUCTIONS = "You are a weather assistant. Use the tool."
ASK = 'What is the weather in Paris? CALL_TOOL:get_weather:{"city": "Paris"}'


@pytest.fixture(scope="module", autouse=True)
def no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK would otherwise export traces to OpenAI
    yield
    set_tracing_disabled(False)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(tmp_path_factory, fake_upstream_server, name="agents")


class Sent:
    """The bodies of the SDK's POST /v1/responses, as they left the client."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, request: httpx.Request) -> None:
        if request.url.path.endswith("/responses") and request.method == "POST":
            self.bodies.append(orjson.loads(request.content))


@pytest.fixture
async def agent_setup(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> AsyncIterator[tuple[Agent[Any], list[str], Sent]]:
    sent = Sent()
    http = httpx.AsyncClient(event_hooks={"request": [sent]}, timeout=30)
    client = openai.AsyncOpenAI(
        base_url=server.base_url, api_key="sk-agents", max_retries=0, http_client=http
    )
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny, 21C in {city}"

    agent: Agent[Any] = Agent(
        name="weather",
        instructions=INSTRUCTIONS,
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        model_settings=ModelSettings(temperature=0),
        tools=[get_weather],
    )
    yield agent, calls, sent
    await client.close()


def chat_calls(fake: FakeUpstream) -> list[list[dict[str, Any]]]:
    return [
        r["body"]["messages"] for r in fake.requests() if r["path"].endswith("/chat/completions")
    ]


def get(server: ContextgateServer, path: str) -> dict[str, Any]:
    response = httpx.get(f"{server.base_url}{path}", headers={"Authorization": "Bearer x"})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def check_stored_loop(server: ContextgateServer, response_ids: list[str]) -> None:
    """One conversation: the question, the tool call, its result, the answer; the agent's
    instructions are each response's own."""
    responses = [get(server, f"/responses/{rid}") for rid in response_ids]
    assert [r["instructions"] for r in responses] == [INSTRUCTIONS, INSTRUCTIONS]
    conversations = {r["conversation_id"] for r in responses}
    assert len(conversations) == 1, "the second call started a new conversation"
    stored = get(server, f"/conversations/{conversations.pop()}")["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    call = stored[1]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather"
    assert orjson.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert stored[2]["tool_call_id"] == call["id"]
    assert stored[2]["content"] == "sunny, 21C in Paris"
    assert stored[3]["content"] == "Tool results: sunny, 21C in Paris"
    assert stored[1]["reasoning_steps"][0]["result"] == "sunny, 21C in Paris"


def check_upstream_saw_the_loop(fake: FakeUpstream) -> None:
    first, second = chat_calls(fake)
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[0]["content"] == INSTRUCTIONS
    # The second call is the first one continued: same prefix, then the call and its result.
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[:2] == first
    assert second[3]["tool_call_id"] == second[2]["tool_calls"][0]["id"]
    assert second[3]["content"] == "sunny, 21C in Paris"


async def test_runner_run_with_a_function_tool(
    server: ContextgateServer,
    fake_upstream: FakeUpstream,
    agent_setup: tuple[Agent[Any], list[str], Sent],
) -> None:
    agent, calls, sent = agent_setup
    result = await Runner.run(agent, ASK)
    assert calls == ["Paris"]
    assert result.final_output == "Tool results: sunny, 21C in Paris"
    # The SDK's second call resends the whole run (no previous_response_id).
    assert len(sent.bodies) == 2
    assert "previous_response_id" not in sent.bodies[1]
    kinds = [item.get("type", "message") for item in sent.bodies[1]["input"]]
    assert kinds == ["message", "function_call", "function_call_output"]
    check_upstream_saw_the_loop(fake_upstream)
    check_stored_loop(server, [r.response_id for r in result.raw_responses if r.response_id])


async def test_runner_run_streamed_continues_by_previous_response_id(
    server: ContextgateServer,
    fake_upstream: FakeUpstream,
    agent_setup: tuple[Agent[Any], list[str], Sent],
) -> None:
    agent, calls, sent = agent_setup
    result = Runner.run_streamed(agent, ASK, auto_previous_response_id=True)
    deltas: list[str] = []
    tool_outputs: list[Any] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas.append(event.data.delta)
        elif event.type == "run_item_stream_event" and event.item.type == "tool_call_output_item":
            tool_outputs.append(event.item.output)
    assert calls == ["Paris"]
    assert tool_outputs == ["sunny, 21C in Paris"]
    assert result.final_output == "".join(deltas) == "Tool results: sunny, 21C in Paris"
    # The second call continues the first response with only the tool output.
    first_id = result.raw_responses[0].response_id
    assert len(sent.bodies) == 2
    assert sent.bodies[0]["stream"] is True
    assert sent.bodies[1]["previous_response_id"] == first_id
    assert [item["type"] for item in sent.bodies[1]["input"]] == ["function_call_output"]
    check_upstream_saw_the_loop(fake_upstream)
    check_stored_loop(server, [r.response_id for r in result.raw_responses if r.response_id])
