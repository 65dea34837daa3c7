"""The OpenAI Agents SDK's two conversation forms against a running contextgate, over three
turns (the first with a function tool), the fake upstream recording what the model saw:

- ``Runner.run(..., conversation_id=…)``: each call sends the Responses ``conversation``
  parameter and only the new items; contextgate continues that stored conversation.
- ``session=OpenAIConversationsSession(...)``: the SDK keeps the history itself through the
  Conversations API (``POST /v1/conversations``, items list and create) and resends it.
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
    OpenAIConversationsSession,
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
ANSWER = "Tool results: sunny, 21C in Paris"


@pytest.fixture(scope="module", autouse=True)
def no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK would otherwise export traces to OpenAI
    yield
    set_tracing_disabled(False)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(tmp_path_factory, fake_upstream_server, name="agentsconv")


class Sent:
    """The SDK's requests as they left the client: (method, path, JSON body)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []

    async def __call__(self, request: httpx.Request) -> None:
        body = orjson.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))

    def responses(self) -> list[dict[str, Any]]:
        return [b for m, p, b in self.requests if m == "POST" and p.endswith("/responses")]


@pytest.fixture
async def setup(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> AsyncIterator[tuple[Agent[Any], openai.AsyncOpenAI, Sent]]:
    sent = Sent()
    http = httpx.AsyncClient(event_hooks={"request": [sent]}, timeout=30)
    client = openai.AsyncOpenAI(
        base_url=server.base_url, api_key="sk-agents", max_retries=0, http_client=http
    )

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny, 21C in {city}"

    agent: Agent[Any] = Agent(
        name="weather",
        instructions=INSTRUCTIONS,
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        model_settings=ModelSettings(temperature=0),
        tools=[get_weather],
    )
    yield agent, client, sent
    await client.close()


def chat_calls(fake: FakeUpstream) -> list[list[dict[str, Any]]]:
    return [
        r["body"]["messages"] for r in fake.requests() if r["path"].endswith("/chat/completions")
    ]


def seen(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """What the model saw, as (role, content or tool call name)."""
    found: list[tuple[str, Any]] = []
    for m in messages:
        if m.get("tool_calls"):
            found.append((m["role"], m["tool_calls"][0]["function"]["name"]))
        else:
            found.append((m["role"], m.get("content")))
    return found


THREE_TURNS = [
    ("system", INSTRUCTIONS),
    ("user", ASK),
    ("assistant", "get_weather"),
    ("tool", "sunny, 21C in Paris"),
    ("assistant", ANSWER),
    ("user", "And tomorrow?"),
    ("assistant", "Echo: And tomorrow?"),
    ("user", "Thanks."),
]


async def stored_messages(client: openai.AsyncOpenAI, conversation_id: str) -> list[Any]:
    response = await client.get(f"/conversations/{conversation_id}", cast_to=httpx.Response)
    return [(m["role"], m["content"]) for m in response.json()["messages"]]


async def test_runner_with_conversation_id(
    fake_upstream: FakeUpstream, setup: tuple[Agent[Any], openai.AsyncOpenAI, Sent]
) -> None:
    agent, client, sent = setup
    conversation = await client.conversations.create()
    first = await Runner.run(agent, ASK, conversation_id=conversation.id)
    assert first.final_output == ANSWER
    second = await Runner.run(agent, "And tomorrow?", conversation_id=conversation.id)
    assert second.final_output == "Echo: And tomorrow?"
    third = await Runner.run(agent, "Thanks.", conversation_id=conversation.id)
    assert third.final_output == "Echo: Thanks."
    bodies = sent.responses()
    assert [b["conversation"] for b in bodies] == [conversation.id] * 4
    # Only the new items go out: the history is contextgate's.
    assert [[item.get("type", "message") for item in b["input"]] for b in bodies] == [
        ["message"], ["function_call_output"], ["message"], ["message"],
    ]  # fmt: skip
    # ... and the model saw every earlier turn.
    calls = chat_calls(fake_upstream)
    assert len(calls) == 4
    assert seen(calls[1]) == THREE_TURNS[:4]
    assert seen(calls[2]) == THREE_TURNS[:6]
    assert seen(calls[3]) == THREE_TURNS
    # The conversation holds the three turns once each (instructions are each response's).
    stored = await stored_messages(client, conversation.id)
    assert [role for role, _ in stored] == [
        "user", "assistant", "tool", "assistant", "user", "assistant", "user", "assistant",
    ]  # fmt: skip
    for result in (first, second, third):
        response = result.raw_responses[-1]
        assert response.response_id is not None
        again = await client.responses.retrieve(response.response_id)
        assert again.conversation is not None
        assert again.conversation.id == conversation.id


async def test_runner_with_openai_conversations_session(
    fake_upstream: FakeUpstream, setup: tuple[Agent[Any], openai.AsyncOpenAI, Sent]
) -> None:
    agent, client, sent = setup
    session = OpenAIConversationsSession(openai_client=client)
    first = await Runner.run(agent, ASK, session=session)
    assert first.final_output == ANSWER
    second = await Runner.run(agent, "And tomorrow?", session=session)
    assert second.final_output == "Echo: And tomorrow?"
    third = await Runner.run(agent, "Thanks.", session=session)
    assert third.final_output == "Echo: Thanks."
    assert ("POST", "/v1/conversations", {"items": []}) in sent.requests
    # The SDK resends the session's history: the model saw every earlier turn.
    calls = chat_calls(fake_upstream)
    assert len(calls) == 4
    assert seen(calls[2]) == THREE_TURNS[:6]
    assert seen(calls[3]) == THREE_TURNS
    # The session's conversation holds every item, once, in order.
    items = await session.get_items()
    assert [(i.get("type"), i.get("role")) for i in items] == [
        ("message", "user"), ("function_call", None), ("function_call_output", None),
        ("message", "assistant"), ("message", "user"), ("message", "assistant"),
        ("message", "user"), ("message", "assistant"),
    ]  # fmt: skip
    conversation_id = session.session_id
    stored = await stored_messages(client, conversation_id)
    assert stored[-2:] == [("user", "Thanks."), ("assistant", "Echo: Thanks.")]
    assert len(stored) == 8
    # Each turn continued the session's conversation (its history, with the turn's input
    # added first, is the start of what the SDK sends): contextgate manages that one.
    for result in (first, second, third):
        for raw in result.raw_responses:
            got = await client.get(f"/responses/{raw.response_id}", cast_to=httpx.Response)
            assert got.json()["conversation_id"] == conversation_id
    # pop_item deletes the newest item: it leaves the session's history (kept, not sent).
    popped = await session.pop_item()
    assert popped is not None
    assert popped.get("role") == "assistant"
    assert len(await session.get_items()) == 7
    await session.clear_session()  # deletes the conversation
    with pytest.raises(openai.NotFoundError):
        await client.conversations.retrieve(conversation_id)
