"""OpenAI's Conversations API on a real server (``contextgate serve``), driven by the openai
SDK: create / retrieve / update / delete, items list / create / retrieve / delete, and the
Responses ``conversation`` parameter. Two virtual keys are two tenants; the fake upstream
records what the model was sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MASTER = "sk-master-conversations"
MODEL = "gpt-4o-mini"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(
        tmp_path_factory, fake_upstream_server, {"CONTEXTGATE_MASTER_KEY": MASTER}, name="conv"
    )


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
    with openai.OpenAI(base_url=server.base_url, api_key=keys[0], max_retries=0) as client:
        yield client


@pytest.fixture
def other(server: ContextgateServer, keys: tuple[str, str]) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key=keys[1], max_retries=0) as client:
        yield client


def raw(
    server: ContextgateServer, key: str, method: str, path: str, body: Any = None
) -> httpx.Response:
    return httpx.request(
        method,
        f"{server.base_url}{path}",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def detail(sdk: openai.OpenAI, conversation_id: str) -> dict[str, Any]:
    body: dict[str, Any] = sdk.get(
        f"/conversations/{conversation_id}", cast_to=httpx.Response
    ).json()
    return body


def last_chat(fake: FakeUpstream) -> list[dict[str, Any]]:
    chats = [r for r in fake.requests() if r["path"].endswith("/chat/completions")]
    assert chats, "the upstream was not called"
    messages: list[dict[str, Any]] = chats[-1]["body"]["messages"]
    return messages


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def test_create_retrieve_update_delete(sdk: openai.OpenAI) -> None:
    created = sdk.conversations.create(
        items=[user("hello"), {"type": "message", "role": "assistant", "content": "Hi!"}],
        metadata={"topic": "greeting"},
    )
    assert created.id.startswith("conv_")
    assert created.object == "conversation"
    assert isinstance(created.created_at, int)
    assert created.metadata == {"topic": "greeting"}
    again = sdk.conversations.retrieve(created.id)
    assert (again.id, again.metadata, again.created_at) == (
        created.id, {"topic": "greeting"}, created.created_at,
    )  # fmt: skip
    # contextgate's fields: every stored message, with its place.
    stored = detail(sdk, created.id)
    assert [(m["role"], m["content"], m["sequence_number"]) for m in stored["messages"]] == [
        ("user", "hello", 0),
        ("assistant", "Hi!", 1),
    ]
    assert stored["message_count"] == 2
    assert stored["title"] == "hello"
    assert stored["summaries"] == []
    updated = sdk.conversations.update(created.id, metadata={"topic": "weather", "n": "2"})
    assert updated.metadata == {"topic": "weather", "n": "2"}
    assert sdk.conversations.retrieve(created.id).metadata == {"topic": "weather", "n": "2"}
    # contextgate's own list shows it, with the same shape.
    listed = sdk.get("/conversations", cast_to=httpx.Response).json()["data"]
    assert {"id": created.id, "metadata": {"topic": "weather", "n": "2"}}.items() <= next(
        c for c in listed if c["id"] == created.id
    ).items()
    deleted = sdk.conversations.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (
        created.id, True, "conversation.deleted",
    )  # fmt: skip
    with pytest.raises(openai.NotFoundError):
        sdk.conversations.retrieve(created.id)


def test_items_list_create_retrieve_delete(sdk: openai.OpenAI) -> None:
    conversation = sdk.conversations.create()
    assert sdk.conversations.items.list(conversation.id).data == []
    # No body at all (curl): an empty conversation too.
    bare = sdk.post("/conversations", cast_to=httpx.Response)
    assert (bare.status_code, bare.json()["object"], bare.json()["metadata"]) == (
        200, "conversation", {},
    )  # fmt: skip
    created = sdk.conversations.items.create(
        conversation.id,
        items=[
            user("What is the weather?"),
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {"type": "message", "role": "assistant", "content": "It is sunny."},
        ],  # fmt: skip
    )
    kinds = [item.type for item in created.data]
    assert kinds == ["message", "function_call", "function_call_output", "message"]
    ids = [item.id for item in created.data]  # type: ignore[union-attr]
    assert len(set(ids)) == 4
    assert created.first_id == ids[0]
    assert created.last_id == ids[-1]
    ascending = sdk.conversations.items.list(conversation.id, order="asc")
    assert [item.id for item in ascending.data] == ids  # type: ignore[union-attr]
    first = ascending.data[0]
    assert first.type == "message"
    assert first.role == "user"  # type: ignore[union-attr]
    assert first.content[0].type == "input_text"  # type: ignore[union-attr]
    assert first.content[0].text == "What is the weather?"  # type: ignore[union-attr]
    call = ascending.data[1]
    assert (call.call_id, call.name) == ("call_1", "get_weather")  # type: ignore[union-attr]
    # Newest first by default; pages by `after`.
    page = sdk.conversations.items.list(conversation.id, limit=2)
    assert [item.id for item in page.data] == ids[::-1][:2]  # type: ignore[union-attr]
    assert page.has_more is True
    rest = sdk.conversations.items.list(conversation.id, limit=2, after=ids[2])
    assert [item.id for item in rest.data] == [ids[1], ids[0]]  # type: ignore[union-attr]
    assert rest.has_more is False
    one = sdk.conversations.items.retrieve(ids[2], conversation_id=conversation.id)
    assert (one.type, one.output) == ("function_call_output", "sunny")  # type: ignore[union-attr]
    # Stored as messages, with the tool call paired to its result.
    stored = detail(sdk, conversation.id)["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1]["reasoning_steps"][0]["result"] == "sunny"
    # Delete: the item leaves the list; its raw record is kept, marked deleted.
    after_delete = sdk.conversations.items.delete(ids[3], conversation_id=conversation.id)
    assert after_delete.id == conversation.id
    remaining = sdk.conversations.items.list(conversation.id, order="asc").data
    assert [item.id for item in remaining] == ids[:3]  # type: ignore[union-attr]
    stored = detail(sdk, conversation.id)["messages"]
    assert [(m["content"], m["status"]) for m in stored][3] == ("It is sunny.", "deleted")
    with pytest.raises(openai.NotFoundError):
        sdk.conversations.items.retrieve(ids[3], conversation_id=conversation.id)


def test_responses_conversation_continues_it(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    conversation = sdk.conversations.create(items=[user("My name is Ada.")])
    first = sdk.responses.create(
        model=MODEL, input="What is my name?", conversation=conversation.id
    )
    assert first.conversation is not None
    assert first.conversation.id == conversation.id
    assert (first.model_extra or {})["conversation_id"] == conversation.id
    assert [m["content"] for m in last_chat(fake_upstream)] == [
        "My name is Ada.",
        "What is my name?",
    ]
    # Adding the turn's output as items again (the Agents SDK's session does) stores nothing
    # twice: the items named are the ones stored.
    again = sdk.conversations.items.create(
        conversation.id,
        items=[{"type": "message", "role": "assistant", "content": "Echo: What is my name?"}],
    )
    assert [item.id for item in again.data] == [first.output[0].id]  # type: ignore[union-attr]
    # {"id": …} works too; the second turn sees the first one.
    second = sdk.responses.create(
        model=MODEL, input="And again?", conversation={"id": conversation.id}
    )
    assert second.conversation is not None
    assert second.conversation.id == conversation.id
    assert [m["content"] for m in last_chat(fake_upstream)] == [
        "My name is Ada.", "What is my name?", "Echo: What is my name?", "And again?",
    ]  # fmt: skip
    # The turns are the conversation's items, under the ids the responses gave them.
    items = sdk.conversations.items.list(conversation.id, order="asc").data
    assert len(items) == 5  # the seed, then two turns
    assert items[2].id == first.output[0].id  # type: ignore[union-attr]
    assert items[4].id == second.output[0].id  # type: ignore[union-attr]
    assert sdk.responses.retrieve(second.id).conversation.id == conversation.id  # type: ignore[union-attr]
    # Streamed: the events' Response names the conversation too.
    with sdk.responses.stream(
        model=MODEL, input="Streamed?", conversation=conversation.id
    ) as stream:
        streamed = stream.get_final_response()
    assert streamed.conversation is not None
    assert streamed.conversation.id == conversation.id
    assert [m["content"] for m in last_chat(fake_upstream)][-2:] == [
        "Echo: And again?", "Streamed?",
    ]  # fmt: skip
    # store: false (managed by default): the turn still goes on the conversation.
    unstored = sdk.responses.create(
        model=MODEL, input="Unstored?", conversation=conversation.id, store=False
    )
    assert unstored.conversation is not None
    assert unstored.conversation.id == conversation.id
    assert [m["content"] for m in last_chat(fake_upstream)][-2:] == [
        "Echo: Streamed?", "Unstored?",
    ]  # fmt: skip
    # A deleted item is no longer sent.
    sdk.conversations.items.delete(items[2].id, conversation_id=conversation.id)  # type: ignore[arg-type]
    sdk.responses.create(model=MODEL, input="Last one", conversation=conversation.id)
    sent = [m["content"] for m in last_chat(fake_upstream)]
    assert "Echo: What is my name?" not in sent
    assert sent[-1] == "Last one"


def test_item_reference_resolves_the_callers_items(
    sdk: openai.OpenAI, other: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    first = sdk.responses.create(model=MODEL, input="alpha")
    answer_id = first.output[0].id  # type: ignore[union-attr]
    second = sdk.responses.create(
        model=MODEL,
        input=[user("alpha"), {"type": "item_reference", "id": answer_id}, user("beta")],
    )
    assert [m["content"] for m in last_chat(fake_upstream)] == ["alpha", "Echo: alpha", "beta"]
    # The referenced answer is the stored one: the turn continues the same conversation.
    assert (second.model_extra or {})["conversation_id"] == (first.model_extra or {})[
        "conversation_id"
    ]
    # A function call of an earlier response, by reference, followed by its output.
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    ask = user('Weather? CALL_TOOL:get_weather:{"city": "Paris"}')
    call = sdk.responses.create(model=MODEL, input=[ask], tools=[weather]).output[0]  # type: ignore[list-item]
    assert call.type == "function_call"
    sdk.responses.create(
        model=MODEL,
        tools=[weather],  # type: ignore[list-item]
        input=[
            ask,
            {"type": "item_reference", "id": call.id},  # type: ignore[list-item,typeddict-item]
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
    )
    sent = last_chat(fake_upstream)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id
    assert sent[2]["content"] == "sunny"
    # A conversation item's id works too.
    conversation = sdk.conversations.create(items=[user("gamma")])
    item = sdk.conversations.items.list(conversation.id).data[0]
    sdk.responses.create(
        model=MODEL,
        input=[{"type": "item_reference", "id": item.id}, user("delta")],  # type: ignore[union-attr,list-item]
    )
    assert [m["content"] for m in last_chat(fake_upstream)] == ["gamma", "delta"]
    # Another tenant's item, or an unknown one: 404, nothing stored, the model not called.
    calls = len(fake_upstream.requests())
    for unknown in (answer_id, "msg_unknown", item.id):
        with pytest.raises(openai.NotFoundError) as caught:
            other.responses.create(
                model=MODEL,
                input=[{"type": "item_reference", "id": unknown}, user("x")],  # type: ignore[list-item]
            )
        assert caught.value.body["code"] == "item_not_found"  # type: ignore[index]
        assert caught.value.body["param"] == "input.0.id"  # type: ignore[index]
    assert len(fake_upstream.requests()) == calls
    assert other.get("/conversations", cast_to=httpx.Response).json()["data"] == []


def test_another_tenants_conversation_is_not_found(
    server: ContextgateServer, keys: tuple[str, str], sdk: openai.OpenAI
) -> None:
    conversation = sdk.conversations.create(items=[user("secret")], metadata={"k": "v"})
    item = sdk.conversations.items.list(conversation.id).data[0].id  # type: ignore[union-attr]
    base = f"/conversations/{conversation.id}"
    for method, path, body in [
        ("GET", base, None),
        ("POST", base, {"metadata": {"k": "stolen"}}),
        ("DELETE", base, None),
        ("GET", f"{base}/items", None),
        ("POST", f"{base}/items", {"items": [user("injected")]}),
        ("GET", f"{base}/items/{item}", None),
        ("DELETE", f"{base}/items/{item}", None),
        ("POST", "/responses", {"model": MODEL, "input": "hi", "conversation": conversation.id}),
    ]:
        response = raw(server, keys[1], method, path, body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] in ("conversation_not_found", "item_not_found")
    # Untouched.
    assert sdk.conversations.retrieve(conversation.id).metadata == {"k": "v"}
    assert [m["content"] for m in detail(sdk, conversation.id)["messages"]] == ["secret"]
    assert [m["status"] for m in detail(sdk, conversation.id)["messages"]] == ["complete"]


def test_bad_input_is_400_and_stores_nothing(
    server: ContextgateServer, keys: tuple[str, str], sdk: openai.OpenAI
) -> None:
    key = keys[0]
    before = sdk.get("/conversations", cast_to=httpx.Response).json()["total"]
    conversation = sdk.conversations.create(items=[user("kept")])
    base = f"/conversations/{conversation.id}"
    too_much = {f"k{i}": "v" for i in range(17)}
    for method, path, body in [
        ("POST", "/conversations", {"items": [{"type": "bogus"}]}),
        ("POST", "/conversations", {"metadata": too_much}),
        ("POST", "/conversations", {"items": [user("x")] * 21}),
        ("POST", "/conversations", {"metadata": {"k": 1}}),
        ("POST", base, {"metadata": too_much}),
        ("POST", base, {}),
        ("POST", f"{base}/items", {"items": []}),
        ("POST", f"{base}/items", {"items": [{"type": "message", "role": "bot", "content": "x"}]}),
        ("GET", f"{base}/items?limit=0", None),
        ("GET", f"{base}/items?order=sideways", None),
        ("POST", "/responses", {"model": MODEL, "input": "x", "conversation": {"nope": 1}}),
        ("POST", "/responses", {"model": MODEL, "input": "x", "conversation": conversation.id,
                                "previous_response_id": "resp_1"}),
    ]:  # fmt: skip
        response = raw(server, key, method, path, body)
        assert response.status_code == 400, (method, path, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"
    # An unknown referenced item in items.create: 404, and nothing of the batch is stored.
    response = raw(
        server,
        key,
        "POST",
        f"{base}/items",
        {"items": [user("first"), {"type": "item_reference", "id": "msg_nope"}]},
    )
    assert response.status_code == 404, response.text
    assert [m["content"] for m in detail(sdk, conversation.id)["messages"]] == ["kept"]
    assert sdk.conversations.retrieve(conversation.id).metadata == {}
    assert sdk.get("/conversations", cast_to=httpx.Response).json()["total"] == before + 1
