"""The real server (``contextgate serve``) driven by the official openai SDK, fake upstream behind.

One server for the whole module; the fake upstream is reset before every test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import WEATHER_TOOL, module_server, sse_events
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "gpt-4o-mini"
UPSTREAM_KEY = "sk-upstream-e2e"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(
        tmp_path_factory,
        fake_upstream_server,
        {"CONTEXTGATE_UPSTREAM_API_KEY": UPSTREAM_KEY},
        name="sdk",
    )


@pytest.fixture
def sdk(server: ContextgateServer) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=30)
    yield client
    client.close()


@pytest.fixture
def http(server: ContextgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def stored(http: httpx.Client, conversation_id: str) -> list[dict[str, Any]]:
    response = http.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["messages"]
    assert [m["sequence_number"] for m in messages] == list(range(len(messages)))
    return messages


def sent_upstream(fake: FakeUpstream) -> list[dict[str, Any]]:
    """The messages of the last chat call the fake upstream received."""
    chats = [r for r in fake.requests() if r["path"].endswith("/chat/completions")]
    assert chats, "the upstream was not called"
    messages: list[dict[str, Any]] = chats[-1]["body"]["messages"]
    return messages


def echo(message: Any) -> dict[str, Any]:
    """What an SDK user appends to the history: the returned message object, dumped."""
    dumped: dict[str, Any] = message.model_dump()
    return dumped


# --- non-streaming --------------------------------------------------------------------------------


def test_non_streaming_completion(
    sdk: openai.OpenAI, http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    raw = sdk.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello there"},
        ],
        temperature=0.3,
        seed=7,
    )
    completion = raw.parse()
    assert completion.object == "chat.completion"
    assert completion.model == MODEL
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == "Echo: hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > 0

    extra = completion.model_extra or {}
    conversation_id = extra["conversation_id"]
    assert conversation_id.startswith("conv_")
    assert raw.headers["x-conversation-id"] == conversation_id
    # The contract's four, and the prompt cache's share of prompt_cost.
    assert set(extra["cost"]) == {"prompt_cost", "completion_cost", "planning_cost", "total_cost",
                                  "cache_read_cost", "cache_write_cost"}  # fmt: skip
    assert extra["cost"]["total_cost"] >= 0
    utilization = extra["context_utilization"]
    assert utilization["model_name"] == MODEL
    assert utilization["strategy"] == "simple"
    assert utilization["messages_included"] == 2
    assert utilization["messages_excluded"] == 0
    assert utilization["tokens_used"] > 0
    assert utilization["max_input_tokens"] > utilization["tokens_used"]
    assert utilization["breakdown"]["system"] > 0
    assert utilization["breakdown"]["current"] > 0

    # Forwarded unchanged, with the proxy's upstream key; our extensions stay home.
    record = [r for r in fake_upstream.requests() if r["path"].endswith("/chat/completions")][-1]
    assert record["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"
    body = record["body"]
    assert body["temperature"] == 0.3
    assert body["seed"] == 7
    assert not {"conversation_id", "context", "attachments"} & set(body)
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello there"},
    ]
    assert [m["role"] for m in stored(http, conversation_id)] == ["system", "user", "assistant"]


# --- streaming ------------------------------------------------------------------------------------


def test_streaming_with_the_sdk(sdk: openai.OpenAI, http: httpx.Client) -> None:
    stream = sdk.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "stream these five words please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(content) >= 3
    assert "".join(content) == "Echo: stream these five words please"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes.count("stop") == 1
    assert finishes[-1] == "stop"
    usage_chunks = [c for c in chunks if not c.choices and c.usage is not None]
    assert usage_chunks
    assert usage_chunks[0].usage is not None
    assert usage_chunks[0].usage.completion_tokens > 0
    metadata = chunks[-1]
    assert metadata.choices == []
    extra = metadata.model_extra or {}
    assert extra["conversation_id"].startswith("conv_")
    assert extra["context_utilization"]["strategy"] == "simple"
    assert "total_cost" in extra["cost"]
    messages = stored(http, extra["conversation_id"])
    assert messages[-1]["content"] == "Echo: stream these five words please"
    assert messages[-1]["status"] == "complete"


def test_streaming_wire_format(server: ContextgateServer, http: httpx.Client) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "raw stream check"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    conversation_id = response.headers["x-conversation-id"]
    events = sse_events(response)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    # role chunk, content deltas, finish, one last chunk with usage and the metadata.
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    with_choices = [c for c in chunks if c["choices"]]
    finish_at = [i for i, c in enumerate(with_choices) if c["choices"][0]["finish_reason"]]
    assert finish_at == [len(with_choices) - 1]
    assert with_choices[-1]["choices"][0]["finish_reason"] == "stop"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in with_choices)
    assert text == "Echo: raw stream check"
    assert sum(1 for c in with_choices if c["choices"][0]["delta"].get("content")) >= 3
    tail = chunks[len(with_choices) :]
    # Exactly one chunk carries usage, as OpenAI sends it (clients that add usage chunks up,
    # like LangChain with stream_usage=True, would otherwise count every token twice).
    assert [c for c in chunks if "usage" in c] == tail
    assert len(tail) == 1, tail
    metadata = tail[0]
    assert metadata["choices"] == []
    assert metadata["usage"]["total_tokens"] > 0
    assert metadata["conversation_id"] == conversation_id
    assert set(metadata["cost"]) == {
        "prompt_cost",
        "completion_cost",
        "planning_cost",
        "total_cost",
        "cache_read_cost",
        "cache_write_cost",
    }
    assert metadata["context_utilization"]["messages_included"] == 1
    assert [m["role"] for m in stored(http, conversation_id)] == ["user", "assistant"]


def test_streaming_without_include_usage_has_no_usage_chunk(http: httpx.Client) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "no usage"}], "stream": True}
    events = sse_events(http.post("/v1/chat/completions", json=body))
    chunks = events[:-1]
    assert events[-1] == "[DONE]"
    without_choices = [c for c in chunks if not c["choices"]]
    assert len(without_choices) == 1  # only the metadata chunk
    assert "usage" not in without_choices[0] or without_choices[0]["usage"] is None
    assert without_choices[0]["conversation_id"]


# --- tools ----------------------------------------------------------------------------------------


def test_tools_round_trip(
    sdk: openai.OpenAI, http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    messages: list[Any] = [
        {"role": "user", "content": 'What is the weather? CALL_TOOL:get_weather:{"city": "Paris"}'}
    ]
    first = sdk.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert fake_upstream.requests()[-1]["body"]["tools"] == [WEATHER_TOOL]
    conversation_id = (first.model_extra or {})["conversation_id"]

    messages += [
        echo(choice.message),
        {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"},
    ]
    second = sdk.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "Tool results: 18C and sunny"
    assert (second.model_extra or {})["conversation_id"] == conversation_id
    upstream = sent_upstream(fake_upstream)
    assert [m["role"] for m in upstream] == ["user", "assistant", "tool"]
    assert upstream[1]["tool_calls"][0]["id"] == call.id

    history = stored(http, conversation_id)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    steps = history[1]["reasoning_steps"]
    assert len(steps) == 1
    assert steps[0]["tool_call_id"] == call.id
    assert steps[0]["tool_name"] == "get_weather"
    assert json.loads(steps[0]["arguments"]) == {"city": "Paris"}
    assert steps[0]["result"] == "18C and sunny"
    assert steps[0]["result_sequence_number"] == 2


def test_streamed_tool_call_deltas_and_result_by_id(
    sdk: openai.OpenAI, http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    stream = sdk.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Reykjavik, Iceland"}'}
        ],
        tools=[WEATHER_TOOL],
        stream=True,
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(deltas) >= 3  # the head (id, name), then the arguments in pieces
    head = deltas[0].tool_calls[0]  # type: ignore[index]
    assert head.id
    assert head.function is not None
    assert head.function.name == "get_weather"
    arguments = "".join(
        (d.tool_calls[0].function.arguments or "") if d.tool_calls[0].function else ""  # type: ignore[index]
        for d in deltas
    )
    assert json.loads(arguments) == {"city": "Reykjavik, Iceland"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    conversation_id = (chunks[-1].model_extra or {})["conversation_id"]

    # The client answers with the tool result only, naming the conversation.
    follow = sdk.chat.completions.create(
        model=MODEL,
        messages=[{"role": "tool", "tool_call_id": head.id, "content": "-2C"}],
        tools=[WEATHER_TOOL],
        stream=True,
        extra_body={"conversation_id": conversation_id},
    )
    text = "".join(c.choices[0].delta.content or "" for c in follow if c.choices)
    assert text == "Tool results: -2C"
    assert [m["role"] for m in sent_upstream(fake_upstream)] == ["user", "assistant", "tool"]
    history = stored(http, conversation_id)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[1]["tool_calls"][0]["function"]["arguments"] == arguments
    assert history[1]["reasoning_steps"][0]["result"] == "-2C"


# --- continuation ---------------------------------------------------------------------------------


def test_continuation_by_id_in_body_and_header_with_new_messages_only(
    sdk: openai.OpenAI, http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    first = sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "first question"}]
    )
    conversation_id = (first.model_extra or {})["conversation_id"]

    second = sdk.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "second question"}],
        extra_body={"conversation_id": conversation_id},
    )
    assert (second.model_extra or {})["conversation_id"] == conversation_id
    assert [m["content"] for m in sent_upstream(fake_upstream)] == [
        "first question",
        "Echo: first question",
        "second question",
    ]

    third = sdk.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "third question"}],
        extra_headers={"X-Conversation-Id": conversation_id},
    )
    assert third.headers["x-conversation-id"] == conversation_id
    assert (third.parse().model_extra or {})["conversation_id"] == conversation_id
    assert len(sent_upstream(fake_upstream)) == 5
    history = stored(http, conversation_id)
    assert [m["content"] for m in history] == [
        "first question",
        "Echo: first question",
        "second question",
        "Echo: second question",
        "third question",
        "Echo: third question",
    ]


def test_continuation_by_full_history_without_id(sdk: openai.OpenAI, http: httpx.Client) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "full history client"},
        {"role": "user", "content": "alpha"},
    ]
    first = sdk.chat.completions.create(model=MODEL, messages=messages)
    conversation_id = (first.model_extra or {})["conversation_id"]
    for word in ("beta", "gamma"):
        # The SDK's own message object goes back (refusal: None, annotations, …).
        messages += [echo(first.choices[0].message), {"role": "user", "content": word}]
        first = sdk.chat.completions.create(model=MODEL, messages=messages)
        assert (first.model_extra or {})["conversation_id"] == conversation_id
    history = stored(http, conversation_id)
    assert [m["content"] for m in history] == [
        "full history client",
        "alpha",
        "Echo: alpha",
        "beta",
        "Echo: beta",
        "gamma",
        "Echo: gamma",
    ]


def test_unknown_conversation_id_is_404(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"conversation_id": "conv_nope"},
        )
    assert info.value.status_code == 404
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "conversation_not_found"


# --- context options ------------------------------------------------------------------------------


def test_context_disabled_is_a_pure_pass_through(
    sdk: openai.OpenAI, http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    before = http.get("/v1/conversations").json()["total"]
    messages = [
        {"role": "system", "content": "stateless"},
        {"role": "user", "content": "do not store this"},
    ]
    raw = sdk.chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, extra_body={"context": {"enabled": False}}
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Echo: do not store this"
    assert (completion.model_extra or {}).get("conversation_id") is None
    assert "x-conversation-id" not in raw.headers
    assert sent_upstream(fake_upstream) == messages
    assert http.get("/v1/conversations").json()["total"] == before


def test_newest_message_too_long_for_the_budget(
    sdk: openai.OpenAI, http: httpx.Client, fake_upstream: FakeUpstream
) -> None:
    before = http.get("/v1/conversations").json()["total"]
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "word " * 200}],
            extra_body={"context": {"max_input_tokens": 50}},
        )
    assert info.value.status_code == 400
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "context_length_exceeded"
    assert info.value.body["type"] == "invalid_request_error"
    assert fake_upstream.requests() == []
    assert http.get("/v1/conversations").json()["total"] == before


def test_small_budget_trims_history_and_says_so(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    first = sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "old " * 60}]
    )
    conversation_id = (first.model_extra or {})["conversation_id"]
    second = sdk.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "short"}],
        extra_body={"conversation_id": conversation_id, "context": {"max_input_tokens": 60}},
    )
    utilization = (second.model_extra or {})["context_utilization"]
    assert utilization["max_input_tokens"] == 60
    assert utilization["tokens_used"] <= 60
    assert utilization["messages_excluded"] >= 1
    assert sent_upstream(fake_upstream)[-1]["content"] == "short"
    assert all("old old" not in str(m["content"]) for m in sent_upstream(fake_upstream))


# --- system endpoints -----------------------------------------------------------------------------


def test_health_ready_and_models(sdk: openai.OpenAI, http: httpx.Client) -> None:
    assert http.get("/health").status_code == 200
    ready = http.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["database"] == "ok"
    names = {model.id for model in sdk.models.list()}
    assert {"fake-model", "gpt-4o-mini", "fake-planner", "fake-summarizer"} <= names


def test_conversations_list_and_delete(sdk: openai.OpenAI, http: httpx.Client) -> None:
    completion = sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "to be deleted"}]
    )
    conversation_id = (completion.model_extra or {})["conversation_id"]
    listed = http.get("/v1/conversations", params={"limit": 100}).json()
    assert conversation_id in {c["id"] for c in listed["data"]}
    assert http.delete(f"/v1/conversations/{conversation_id}").status_code == 200
    gone = http.get(f"/v1/conversations/{conversation_id}")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "conversation_not_found"
