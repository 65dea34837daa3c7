"""POST /v1/responses on a real server (``contextgate serve``), driven by the openai SDK.

The fake upstream speaks chat completions only: every response goes through the internal
chat turn and back. Two virtual keys are two tenants.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseItem
from pydantic import TypeAdapter

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MASTER = "sk-master-responses"
MODEL = "gpt-4o-mini"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
ITEMS: TypeAdapter[Any] = TypeAdapter(ResponseItem)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    # store=false honoured strictly here (test_store_false_keeps_nothing); the default
    # manages it (test_store_false_manage.py).
    env = {"CONTEXTGATE_MASTER_KEY": MASTER, "CONTEXTGATE_RESPONSES_STORE_FALSE": "passthrough"}
    yield from module_server(tmp_path_factory, fake_upstream_server, env, name="resp")


def issue_key(server: ContextgateServer, name: str) -> str:
    response = httpx.post(
        f"{server.base_url}/keys",
        json={"name": name},
        headers={"Authorization": f"Bearer {MASTER}"},
    )
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


@pytest.fixture(scope="module")
def keys(server: ContextgateServer) -> tuple[str, str]:
    return issue_key(server, "tenant-a"), issue_key(server, "tenant-b")


@pytest.fixture
def sdk(server: ContextgateServer, keys: tuple[str, str]) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key=keys[0], max_retries=0, timeout=30)
    yield client
    client.close()


@pytest.fixture
def other(server: ContextgateServer, keys: tuple[str, str]) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key=keys[1], max_retries=0, timeout=30)
    yield client
    client.close()


def last_chat(fake: FakeUpstream) -> list[dict[str, Any]]:
    chats = [r for r in fake.requests() if r["path"].endswith("/chat/completions")]
    assert chats, "the upstream was not called"
    messages: list[dict[str, Any]] = chats[-1]["body"]["messages"]
    return messages


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content")) for m in messages if m["role"] in ("user", "assistant")]


def stored(sdk: openai.OpenAI, conversation_id: str) -> list[dict[str, Any]]:
    response = sdk.get(f"/conversations/{conversation_id}", cast_to=httpx.Response)
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def extra(response: Response) -> dict[str, Any]:
    return response.model_extra or {}


def test_create_answers_as_openai_with_contextgates_fields(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    raw = sdk.responses.with_raw_response.create(
        model=MODEL, input="hello there", instructions="Be brief.", metadata={"run": "1"}
    )
    response = raw.parse()
    assert response.id.startswith("resp_")
    assert (response.object, response.status) == ("response", "completed")
    assert response.output_text == "Echo: hello there"
    assert response.output[0].id.startswith("msg_")  # type: ignore[union-attr]
    assert response.metadata == {"run": "1"}
    assert response.instructions == "Be brief."
    usage = response.usage
    assert usage is not None
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    conversation_id = extra(response)["conversation_id"]
    assert raw.headers["x-conversation-id"] == conversation_id
    assert extra(response)["context_utilization"]["tokens_used"] > 0
    sent = last_chat(fake_upstream)
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert sent[-1]["content"] == "hello there"
    # instructions belong to the response (GET answers them), not to the conversation
    assert [m["role"] for m in stored(sdk, conversation_id)] == ["user", "assistant"]


def test_stream_is_openais_typed_events(sdk: openai.OpenAI) -> None:
    with sdk.responses.stream(model=MODEL, input="stream me") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for kind in ("response.output_item.added", "response.content_part.added",
                 "response.output_text.done", "response.content_part.done",
                 "response.output_item.done"):  # fmt: skip
        assert kind in kinds
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == final.output_text == "Echo: stream me"
    assert extra(final)["conversation_id"]
    # Stored with the turn: readable at once, with the same output item ids.
    again = sdk.responses.retrieve(final.id)
    assert again.output_text == final.output_text
    assert extra(again)["context_utilization"] == extra(final)["context_utilization"]
    assert [item.id for item in again.output] == [item.id for item in final.output]  # type: ignore[union-attr]


def test_a_function_tool_loop_streamed_and_continued(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    with sdk.responses.stream(
        model=MODEL,
        input='What is the weather? CALL_TOOL:get_weather:{"city": "Paris"}',
        tools=[WEATHER],  # type: ignore[list-item]
    ) as stream:
        events = list(stream)
        first = stream.get_final_response()
    call = first.output[0]
    assert call.type == "function_call"
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert call.id.startswith("fc_")  # type: ignore[union-attr]
    assert call.call_id  # type: ignore[union-attr]
    assert "response.function_call_arguments.done" in [e.type for e in events]
    upstream_tools = [
        r for r in fake_upstream.requests() if r["path"].endswith("/chat/completions")
    ][-1]["body"]["tools"]
    assert upstream_tools[0]["function"]["name"] == "get_weather"  # nested for chat
    second = sdk.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21C"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.output_text == "Tool results: sunny, 21C"
    assert extra(second)["conversation_id"] == extra(first)["conversation_id"]
    sent = last_chat(fake_upstream)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id


def test_previous_response_id_chains_and_branches(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    r1 = sdk.responses.create(model=MODEL, input="alpha")
    r2 = sdk.responses.create(model=MODEL, input="beta", previous_response_id=r1.id)
    r3 = sdk.responses.create(model=MODEL, input="gamma", previous_response_id=r2.id)
    conversation = extra(r1)["conversation_id"]
    assert extra(r2)["conversation_id"] == extra(r3)["conversation_id"] == conversation
    assert texts(last_chat(fake_upstream)) == [
        "alpha", "Echo: alpha", "beta", "Echo: beta", "gamma",
    ]  # fmt: skip
    # From r1 again: a branch that does not see beta/gamma; the original is untouched.
    branch = sdk.responses.create(model=MODEL, input="delta", previous_response_id=r1.id)
    assert texts(last_chat(fake_upstream)) == ["alpha", "Echo: alpha", "delta"]
    fork = extra(branch)["conversation_id"]
    assert fork != conversation
    assert len(stored(sdk, conversation)) == 6
    assert [m["content"] for m in stored(sdk, fork)] == [
        "alpha", "Echo: alpha", "delta", "Echo: delta",
    ]  # fmt: skip
    # The branch goes on from its own latest response; the main line from its own.
    on_branch = sdk.responses.create(model=MODEL, input="eps", previous_response_id=branch.id)
    assert extra(on_branch)["conversation_id"] == fork
    main_line = sdk.responses.create(model=MODEL, input="zeta", previous_response_id=r3.id)
    assert extra(main_line)["conversation_id"] == conversation
    assert texts(last_chat(fake_upstream))[-2:] == ["Echo: gamma", "zeta"]


def test_retrieve_input_items_and_delete(sdk: openai.OpenAI) -> None:
    response = sdk.responses.create(
        model=MODEL,
        input=[
            {"role": "developer", "content": "Answer in English."},
            {"role": "user", "content": [{"type": "input_text", "text": "first"}]},
        ],
    )
    got = sdk.responses.retrieve(response.id)
    Response.model_validate(got.model_dump())
    assert got.output_text == "Echo: first"
    items = sdk.responses.input_items.list(response.id, order="asc")
    assert [item.role for item in items.data] == ["developer", "user"]  # type: ignore[union-attr]
    for item in items.data:
        ITEMS.validate_python(item.model_dump())
    newest_first = sdk.responses.input_items.list(response.id)
    assert [i.id for i in newest_first.data] == [i.id for i in reversed(items.data)]
    sdk.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.create(model=MODEL, input="x", previous_response_id=response.id)


def test_another_tenants_response_is_a_404(sdk: openai.OpenAI, other: openai.OpenAI) -> None:
    mine = sdk.responses.create(model=MODEL, input="secret")
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.input_items.list(mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model=MODEL, input="x", previous_response_id=mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(mine.id)
    assert sdk.responses.retrieve(mine.id).output_text == "Echo: secret"


@pytest.mark.parametrize(
    "fields",
    [
        {"input": [{"type": "web_search_call", "id": "ws_1"}]},
        {"input": "x", "tools": [{"type": "function", "description": "no name"}]},
        {"input": [{"role": "robot", "content": "x"}]},
        {"input": [{"type": "function_call_output", "output": "no call id"}]},
        {"input": "x", "max_output_tokens": 0},
        {"input": []},
        {"input": "x", "tools": [WEATHER], "tool_choice": {"type": "file_search"}},
        {"input": "x", "previous_response_id": "resp_unknown"},
    ],
)
def test_bad_input_is_a_4xx_in_openais_envelope_and_nothing_is_stored(
    server: ContextgateServer,
    keys: tuple[str, str],
    fake_upstream: FakeUpstream,
    fields: dict[str, Any],
) -> None:
    headers = {"Authorization": f"Bearer {keys[1]}"}
    before = httpx.get(f"{server.base_url}/conversations", headers=headers).json()
    response = httpx.post(
        f"{server.base_url}/responses", json={"model": MODEL, **fields}, headers=headers
    )
    assert response.status_code in (400, 404), response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"]
    assert fake_upstream.requests() == []
    assert httpx.get(f"{server.base_url}/conversations", headers=headers).json() == before


def test_store_false_keeps_nothing(sdk: openai.OpenAI, fake_upstream: FakeUpstream) -> None:
    kept = sdk.responses.create(model=MODEL, input="remember me")
    conversations = sdk.get("/conversations", cast_to=httpx.Response).json()
    gone = sdk.responses.create(
        model=MODEL, input="not me", store=False, previous_response_id=kept.id
    )
    assert gone.output_text == "Echo: not me"
    assert texts(last_chat(fake_upstream)) == ["remember me", "Echo: remember me", "not me"]
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve(gone.id)
    assert sdk.get("/conversations", cast_to=httpx.Response).json() == conversations
    notes = extra(gone)["context_utilization"]["notes"]
    assert any("CONTEXTGATE_RESPONSES_STORE_FALSE=passthrough" in note for note in notes)
    # Nothing is stored, so nothing can be compacted: a clear 400, not a silent loss.
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.responses.create(
            model=MODEL,
            store=False,
            input=[{"role": "user", "content": "x"}, {"type": "compaction_trigger"}],  # type: ignore[list-item]
        )
    assert "compaction_unavailable" in str(refused.value)


def test_reasoning_becomes_a_reasoning_item(sdk: openai.OpenAI) -> None:
    response = sdk.responses.create(model=MODEL, input="think", reasoning={"effort": "low"})
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message"]
    reasoning = response.output[0]
    assert reasoning.id.startswith("rs_")
    assert reasoning.summary[0].text == "Thinking about: think"  # type: ignore[union-attr]
