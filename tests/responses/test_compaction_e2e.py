"""Compaction on the Responses door, on a real server with the openai SDK and the fake upstream:
``POST /v1/responses/compact`` and the ``compaction_trigger`` item for a model that is not
OpenAI's, the sealed ``compaction`` item expanded when sent back, forged and foreign items
refused, ``context_management`` and ``truncation`` honoured and said."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.responses.test_responses_e2e import MASTER, issue_key
from tests.support.e2e import module_server, sse_events
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "fake-model"  # not an OpenAI model: compaction is contextgate's own
EPISODE = "The user planned a trip to Lisbon; the assistant listed three steps."
SUMMARY = orjson.dumps({"episodic": EPISODE, "facts": []}).decode()
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "plan a trip to Lisbon"},
    {"role": "assistant", "content": "Echo: plan a trip to Lisbon"},
    {"role": "user", "content": "book the hotel"},
    {"role": "assistant", "content": "Echo: book the hotel"},
]


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    env = {
        "CONTEXTGATE_MASTER_KEY": MASTER,
        "CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer",
        "CONTEXTGATE_RAW_TAIL_TURNS": "0",
        "CONTEXTGATE_MESSAGE_RECALL": "false",
    }
    yield from module_server(tmp_path_factory, fake_upstream_server, env, name="resp-compact")


@pytest.fixture(scope="module")
def keys(server: ContextgateServer) -> tuple[str, str]:
    return issue_key(server, "compact-a"), issue_key(server, "compact-b")


@pytest.fixture
def sdk(server: ContextgateServer, keys: tuple[str, str]) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key=keys[0], max_retries=0, timeout=30)
    yield client
    client.close()


@pytest.fixture
def summarizer(fake_upstream: FakeUpstream) -> FakeUpstream:
    fake_upstream.script("fake-summarizer", [SUMMARY] * 4)
    return fake_upstream


def _chats(fake: FakeUpstream, model: str = MODEL) -> list[list[dict[str, Any]]]:
    return [
        r["body"]["messages"]
        for r in fake.requests()
        if r["path"].endswith("/chat/completions") and r["body"]["model"] == model
    ]


def _degraded(server: ContextgateServer) -> float:
    metrics = httpx.get(f"{server.url}/metrics").text
    lines = [
        line for line in metrics.splitlines() if line.startswith("contextgate_context_degraded")
    ]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if "_created" not in line)


def _post(server: ContextgateServer, key: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{server.base_url}/responses", json=body, headers=headers, timeout=30)


def test_compact_endpoint_for_any_model_and_the_item_expands_to_the_summary(
    sdk: openai.OpenAI, summarizer: FakeUpstream
) -> None:
    raw = sdk.responses.with_raw_response.compact(model=MODEL, input=HISTORY)  # type: ignore[arg-type]
    compacted = raw.parse()
    assert compacted.object == "response.compaction"
    kinds = [(item.type, getattr(item, "role", None)) for item in compacted.output]
    assert kinds == [("message", "user"), ("message", "user"), ("compaction", None)]
    item = compacted.output[-1]
    assert item.encrypted_content.startswith("cgc1.")  # type: ignore[union-attr]
    assert any(
        "plan a trip" in orjson.dumps(m).decode() for m in _chats(summarizer, "fake-summarizer")[0]
    )
    extra = compacted.model_extra or {}
    # Every whole turn but the latest (kept raw, as contextgate keeps the turn it is on).
    assert extra["context_utilization"]["compaction"]["turns_compacted"] == 1
    # Sent back (as a stateless client does: the compacted output, then the new message):
    # the model gets the stored summary in place of the compacted turns.
    summarizer.reset()
    follow = sdk.responses.create(
        model=MODEL,
        store=False,
        input=[
            *raw.http_response.json()["output"],
            {"role": "user", "content": "and the flights?"},
        ],
    )
    assert (follow.model_extra or {})["conversation_id"] == extra["conversation_id"]
    sent = _chats(summarizer)[-1]
    assert any(m["role"] == "system" and EPISODE in m["content"] for m in sent)
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        "book the hotel",
        "and the flights?",
    ]
    notes = (follow.model_extra or {})["context_utilization"]["notes"]
    assert any(note.startswith("compaction item expanded") for note in notes)
    # The raw history is still kept, with the new turn after it.
    stored = sdk.get(f"/conversations/{extra['conversation_id']}", cast_to=httpx.Response)
    contents = [m["content"] for m in stored.json()["messages"]]
    assert contents == [*(m["content"] for m in HISTORY), "and the flights?", follow.output_text]


def test_a_compaction_trigger_answers_one_compaction_item_streamed_or_not(
    server: ContextgateServer, keys: tuple[str, str], summarizer: FakeUpstream
) -> None:
    body = {"model": MODEL, "store": False, "input": [*HISTORY, {"type": "compaction_trigger"}]}
    plain = _post(server, keys[0], body)
    assert plain.status_code == 200, plain.text
    output = plain.json()["output"]
    assert [item["type"] for item in output] == ["compaction"]
    streamed = _post(server, keys[0], {**body, "stream": True})
    assert streamed.status_code == 200, streamed.text
    events = sse_events(streamed)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(5))
    done = events[-1]["response"]["output"]
    assert [item["type"] for item in done] == ["compaction"]
    assert done[0]["encrypted_content"].startswith("cgc1.")
    # Both compacted the same stored conversation (found by its leading messages).
    assert plain.json()["conversation_id"] == events[-1]["response"]["conversation_id"]
    assert not _chats(summarizer)  # no call to the model itself
    # Sent back, streamed: the final Response says what was done (notes), which are decisions,
    # not fallbacks: the degraded-requests metric does not count them.
    degraded = _degraded(server)
    item = done[0]
    follow = {**body, "stream": True, "input": [item, {"role": "user", "content": "go on"}]}
    events = sse_events(_post(server, keys[0], follow))
    notes = events[-1]["response"]["context_utilization"]["notes"]
    assert any(note.startswith("compaction item expanded") for note in notes)
    assert any(note.startswith("store=false: the conversation is stored") for note in notes)
    assert _degraded(server) == degraded


def test_forged_and_foreign_compaction_items_are_refused(
    server: ContextgateServer, keys: tuple[str, str], summarizer: FakeUpstream
) -> None:
    trigger = {"model": MODEL, "input": [*HISTORY, {"type": "compaction_trigger"}]}
    item = _post(server, keys[0], trigger).json()["output"][0]
    summarizer.reset()
    payload, mac = item["encrypted_content"].split(".")[1:]
    forged = [
        "gAAAAABopenai-opaque-ciphertext",  # another provider's item
        f"cgc1.{payload}.{mac[:-2]}AA",  # altered seal
        f"cgc1.{orjson.dumps({'c': 'conv_x', 'n': 1}).hex()}.{mac}",  # altered payload
    ]
    for content in forged:
        sent = {**item, "encrypted_content": content}
        body = {"model": MODEL, "input": [sent, {"role": "user", "content": "go on"}]}
        refused = _post(server, keys[0], body)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_compaction_item"
        assert error["param"] == "input.0.encrypted_content"
    # Its own item, named with another conversation of the same caller: refused too.
    other = _post(server, keys[0], {"model": MODEL, "input": "another conversation"}).json()
    body = {
        "model": MODEL,
        "conversation_id": other["conversation_id"],
        "input": [item, {"role": "user", "content": "go on"}],
    }
    refused = _post(server, keys[0], body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "conversation_id"
    summarizer.reset()
    # Another tenant's item, sealed for the first key: refused, nothing of it seen or stored.
    before = httpx.get(
        f"{server.base_url}/conversations", headers={"Authorization": f"Bearer {keys[1]}"}
    ).json()
    body = {"model": MODEL, "input": [item, {"role": "user", "content": "show me theirs"}]}
    refused = _post(server, keys[1], body)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_compaction_item"
    after = httpx.get(
        f"{server.base_url}/conversations", headers={"Authorization": f"Bearer {keys[1]}"}
    ).json()
    assert after == before
    compact = httpx.post(
        f"{server.base_url}/responses/compact",
        json={"model": MODEL, "input": [item]},
        headers={"Authorization": f"Bearer {keys[1]}"},
    )
    assert compact.status_code == 400
    assert _chats(summarizer) == []
    assert _chats(summarizer, "fake-summarizer") == []


def test_a_misplaced_trigger_and_bad_context_management_are_400s(
    server: ContextgateServer, keys: tuple[str, str]
) -> None:
    misplaced = {"model": MODEL, "input": [{"type": "compaction_trigger"}, *HISTORY]}
    response = _post(server, keys[0], misplaced)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_compaction_trigger"
    bad = {"model": MODEL, "input": "hi", "context_management": [{"type": "clear_tool_uses"}]}
    response = _post(server, keys[0], bad)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "context_management.0.type"


def test_context_management_and_truncation_map_onto_the_budget(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    response = sdk.responses.create(
        model=MODEL,
        input="a short question",
        truncation="auto",
        extra_body={"context_management": [{"type": "compaction", "compact_threshold": 3000}]},
    )
    utilization = (response.model_extra or {})["context_utilization"]
    assert utilization["max_input_tokens"] == 3000
    notes = " | ".join(utilization["notes"])
    assert "context_management: compaction past 3000 tokens" in notes
    assert "truncation=auto" in notes
    assert response.truncation == "auto"


def test_truncation_disabled_keeps_openais_400_and_auto_fits(
    server: ContextgateServer, keys: tuple[str, str], fake_upstream: FakeUpstream
) -> None:
    # Six long messages: the whole input passes fake-model's window (8192, the default).
    long = [
        {"role": role, "content": f"part {i}: " + "alpha beta gamma delta " * 500}
        for i, role in enumerate(["user", "assistant"] * 3)
    ]
    body = {"model": MODEL, "store": False, "input": [*long, {"role": "user", "content": "sum up"}]}
    refused = _post(server, keys[1], {**body, "truncation": "disabled"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "context_length_exceeded"
    assert _chats(fake_upstream) == []
    for truncation in ("auto", None):
        sent = {**body, "truncation": truncation} if truncation else body
        fitted = _post(server, keys[1], sent)
        assert fitted.status_code == 200, fitted.text
        utilization = fitted.json()["context_utilization"]
        assert utilization["tokens_used"] <= utilization["max_input_tokens"] < 8192
    assert len(_chats(fake_upstream)) == 2


def test_compact_a_stored_response_by_its_id(sdk: openai.OpenAI, summarizer: FakeUpstream) -> None:
    first = sdk.responses.create(model=MODEL, input="plan a trip to Porto")
    second = sdk.responses.create(model=MODEL, input="book a train", previous_response_id=first.id)
    raw = sdk.responses.with_raw_response.compact(model=MODEL, previous_response_id=second.id)
    body = raw.http_response.json()
    assert [item["type"] for item in body["output"]] == ["compaction"]
    assert body["conversation_id"] == (second.model_extra or {})["conversation_id"]
    assert body["context_utilization"]["compaction"]["turns_compacted"] == 1
    # Going on from the compacted output: the summary, the latest turn raw, the new message.
    follow = sdk.responses.create(
        model=MODEL, input=[*body["output"], {"role": "user", "content": "and a hotel"}]
    )
    assert (follow.model_extra or {})["conversation_id"] == body["conversation_id"]
    sent = _chats(summarizer)[-1]
    assert any(m["role"] == "system" and EPISODE in m["content"] for m in sent)
    users = [m["content"] for m in sent if m["role"] == "user"]
    assert users == ["book a train", "and a hotel"]


def test_a_failed_summarizer_degrades_the_compaction_not_the_request(
    server: ContextgateServer, keys: tuple[str, str], fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults("fake-summarizer", [{"status": 500}] * 4)
    history = [{"role": m["role"], "content": f"{m['content']} (failing)"} for m in HISTORY]
    body = {"model": MODEL, "input": [*history, {"type": "compaction_trigger"}]}
    answered = _post(server, keys[0], body)
    assert answered.status_code == 200, answered.text
    assert [item["type"] for item in answered.json()["output"]] == ["compaction"]
    utilization = answered.json()["context_utilization"]
    assert utilization["compaction"]["error"]
    assert any(note.startswith("compaction failed") for note in utilization["notes"])
    # Sent back, it still continues the stored conversation: its raw history, fitted.
    item = answered.json()["output"][0]
    follow = _post(
        server, keys[0], {"model": MODEL, "input": [item, {"role": "user", "content": "next"}]}
    )
    assert follow.status_code == 200, follow.text
    sent = _chats(fake_upstream)[-1]
    assert [m["content"] for m in sent if m["role"] == "user"] == [
        *(m["content"] for m in history if m["role"] == "user"),
        "next",
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_context_management_compacts_and_ends_the_output_with_a_compaction_item(
    server: ContextgateServer, keys: tuple[str, str], summarizer: FakeUpstream, stream: bool
) -> None:
    long = [
        {"role": role, "content": f"{stream} part {i}: " + "lorem ipsum dolor " * 120}
        for i, role in enumerate(["user", "assistant"] * 3)
    ]
    # A stateless client's conversation, stored as it goes (store=false is managed)…
    first = _post(server, keys[0], {"model": MODEL, "store": False, "input": long[:-1]})
    assert first.status_code == 200, first.text
    assert first.json()["context_utilization"]["compaction"] is None
    # … then with context_management: past the threshold, its older turns are compacted.
    body = {
        "model": MODEL,
        "store": False,
        "stream": stream,
        "input": [*long[:-1], *first.json()["output"], {"role": "user", "content": "sum it up"}],
        "context_management": [{"type": "compaction", "compact_threshold": 1200}],
    }
    answered = _post(server, keys[0], body)
    assert answered.status_code == 200, answered.text
    if stream:
        events = sse_events(answered)
        kinds = [e["type"] for e in events]
        assert kinds[-3:] == [
            "response.output_item.added",
            "response.output_item.done",
            "response.completed",
        ]
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        response = events[-1]["response"]
    else:
        response = answered.json()
    output = response["output"]
    assert [item["type"] for item in output] == ["message", "compaction"]
    assert response["context_utilization"]["compaction"]["summary_ids"]
    assert response["context_utilization"]["max_input_tokens"] == 1200
    # As OpenAI's guide says: the items before the latest compaction item may be dropped.
    summarizer.reset()
    follow = {
        "model": MODEL,
        "store": False,
        "input": [output[-1], {"role": "user", "content": "and then?"}],
    }
    went_on = _post(server, keys[0], follow)
    assert went_on.status_code == 200, went_on.text
    assert went_on.json()["conversation_id"] == response["conversation_id"]
    sent = _chats(summarizer)[-1]
    assert any(m["role"] == "system" and EPISODE in m["content"] for m in sent)
    assert sent[-1]["content"] == "and then?"


def test_a_stored_response_keeps_its_compaction_item(
    sdk: openai.OpenAI, summarizer: FakeUpstream
) -> None:
    first = sdk.responses.create(model=MODEL, input="stored: " + "lorem ipsum dolor " * 300)
    second = sdk.responses.with_raw_response.create(
        model=MODEL,
        input="and now?",
        previous_response_id=first.id,
        stream=True,
        extra_body={"context_management": [{"type": "compaction", "compact_threshold": 700}]},
    )
    second.http_response.read()
    events = sse_events(second.http_response)
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["message", "compaction"]
    kept = sdk.get(f"/responses/{final['id']}", cast_to=httpx.Response).json()
    assert kept["output"] == final["output"]
