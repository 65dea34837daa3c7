"""LangChain (langchain-openai's ChatOpenAI) as a client of the running server, as the README
shows it: the chat door and the Responses door, invoke and stream, a tool loop, the
conversation id read from the response headers (LangChain drops unknown body fields), and a
stream's usage counted once (issue 17 point 1: LangChain adds up every chunk's usage)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "gpt-4o-mini"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(tmp_path_factory, fake_upstream_server, name="langchain")


def chat(server: ContextgateServer, **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model=MODEL, base_url=server.base_url, api_key="sk-x", max_retries=0, **options
    )


def stored_roles(server: ContextgateServer, conversation_id: str) -> list[str]:
    response = httpx.get(f"{server.url}/v1/conversations/{conversation_id}", timeout=30)
    assert response.status_code == 200, response.text
    return [message["role"] for message in response.json()["messages"]]


@tool
def get_weather(city: str) -> str:
    """Weather in a city."""
    return f"18C in {city}"


def test_invoke_then_continue_by_the_header_conversation_id(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    llm = chat(server, include_response_headers=True)
    first = llm.invoke("My name is Ada.")
    headers = first.response_metadata["headers"]
    conversation_id = headers["x-contextgate-conversation-id"]
    assert conversation_id.startswith("conv_")
    assert int(headers["x-contextgate-tokens-used"]) > 0
    second = llm.invoke("And now?", extra_body={"conversation_id": conversation_id})
    assert second.response_metadata["headers"]["x-conversation-id"] == conversation_id
    assert "Echo: And now?" in str(second.content)
    assert stored_roles(server, conversation_id) == ["user", "assistant"] * 2
    sent = fake_upstream.requests()[-1]["body"]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"][0] == "My name is Ada."


@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
def test_streamed_usage_is_counted_once(server: ContextgateServer, responses_api: bool) -> None:
    llm = chat(server, stream_usage=True, use_responses_api=responses_api)
    whole = llm.invoke("Count my tokens, please.")
    streamed: AIMessageChunk | None = None
    for chunk in llm.stream("Count my tokens, please."):
        streamed = chunk if streamed is None else streamed + chunk
    assert streamed is not None
    assert whole.usage_metadata is not None
    assert streamed.usage_metadata is not None
    # LangChain adds up the usage of every chunk: exactly one of them may carry it.
    assert streamed.usage_metadata["input_tokens"] == whole.usage_metadata["input_tokens"] > 0
    assert streamed.usage_metadata["output_tokens"] == whole.usage_metadata["output_tokens"] > 0
    assert streamed.text == whole.text
    assert "Echo: Count my tokens, please." in whole.text


@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
def test_a_tool_loop(server: ContextgateServer, responses_api: bool) -> None:
    llm = chat(server, use_responses_api=responses_api).bind_tools([get_weather])
    asked = HumanMessage('Weather?\nCALL_TOOL:get_weather:{"city": "Paris"}')
    called = llm.invoke([asked])
    assert isinstance(called, AIMessage)
    [call] = called.tool_calls
    assert call["name"] == "get_weather"
    assert call["args"] == {"city": "Paris"}
    result = ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])
    answered = llm.invoke([asked, called, result])
    assert "18C in Paris" in answered.text
