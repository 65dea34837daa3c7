"""The chat pipeline in-process (ASGI) against the fake upstream and a real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream


async def test_full_history_client_continues_one_conversation(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    first = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hello"},
            ],
        },
    )
    assert first.status_code == 200, first.text
    body = first.json()
    conversation_id = body["conversation_id"]
    assert first.headers["x-conversation-id"] == conversation_id
    answer = body["choices"][0]["message"]
    second = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hello"},
                answer,
                {"role": "user", "content": "and again"},
            ],
        },
    )
    assert second.json()["conversation_id"] == conversation_id
    stored = (await client.get(f"/v1/conversations/{conversation_id}")).json()
    assert [m["role"] for m in stored["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert [m["sequence_number"] for m in stored["messages"]] == [0, 1, 2, 3, 4]
    sent = fake_upstream.requests()[-1]["body"]["messages"]
    assert [m["content"] for m in sent][:3] == ["be brief", "hello", answer["content"]]


# --- identity and storage through the whole pipeline ---------------------------------------

MODEL = "gpt-4o-mini"


async def _chat(client: httpx.AsyncClient, messages: list[dict[str, Any]], **extra: Any) -> Any:
    response = await client.post(
        "/v1/chat/completions", json={"model": MODEL, "messages": messages, **extra}
    )
    assert response.status_code == 200, response.text
    return response.json()


async def _stored(client: httpx.AsyncClient, conversation_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def _sdk_echo(body: dict[str, Any]) -> dict[str, Any]:
    """The answer as an SDK user sends it back: extra keys, refusal None, reasoning kept."""
    message = dict(body["choices"][0]["message"])
    message.setdefault("refusal", None)
    message.setdefault("annotations", [])
    message.setdefault("audio", None)
    return message


async def test_sliding_window_client_with_id_stores_nothing_twice(
    client: httpx.AsyncClient,
) -> None:
    system = {"role": "system", "content": "window"}
    first = await _chat(client, [system, {"role": "user", "content": "one"}])
    conversation_id = first["conversation_id"]
    second = await _chat(
        client,
        [{"role": "user", "content": "two"}],
        conversation_id=conversation_id,
    )
    # The client keeps only its system prompt and the last exchange, and repeats them.
    window = [
        system,
        {"role": "user", "content": "two"},
        _sdk_echo(second),
        {"role": "user", "content": "three"},
    ]
    await _chat(client, window, conversation_id=conversation_id)
    contents = [m["content"] for m in await _stored(client, conversation_id)]
    assert contents == ["window", "one", "Echo: one", "two", "Echo: two", "three", "Echo: three"]


async def test_same_opening_different_conversations_and_ambiguity(
    client: httpx.AsyncClient,
) -> None:
    opening = [{"role": "user", "content": "same opening"}]
    a = await _chat(client, opening)
    b = await _chat(client, opening)
    # Only the first message in common: no stored conversation is a prefix -> two conversations.
    assert a["conversation_id"] != b["conversation_id"]
    # Both hold exactly the same messages: continuing them by content is ambiguous -> a new one.
    follow = [*opening, _sdk_echo(a), {"role": "user", "content": "which one?"}]
    c = await _chat(client, follow)
    assert c["conversation_id"] not in (a["conversation_id"], b["conversation_id"])
    assert len(await _stored(client, c["conversation_id"])) == 4
    assert len(await _stored(client, a["conversation_id"])) == 2
    assert len(await _stored(client, b["conversation_id"])) == 2
    # Now c is the only conversation with this exact history: it continues.
    later = [*follow, _sdk_echo(c), {"role": "user", "content": "go on"}]
    assert (await _chat(client, later))["conversation_id"] == c["conversation_id"]


async def test_diverging_history_starts_a_new_conversation(client: httpx.AsyncClient) -> None:
    first = await _chat(client, [{"role": "user", "content": "branch point"}])
    edited = {"role": "assistant", "content": "an answer the proxy never gave"}
    second = await _chat(
        client,
        [{"role": "user", "content": "branch point"}, edited, {"role": "user", "content": "?"}],
    )
    assert second["conversation_id"] != first["conversation_id"]
    assert len(await _stored(client, first["conversation_id"])) == 2


async def test_first_kept_history_message_is_stable_across_turns(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    """Chunked trimming: the prompt's prefix stays byte-identical for several turns."""
    first = await _chat(client, [{"role": "user", "content": "turn 0 " + "pad " * 20}])
    conversation_id = first["conversation_id"]
    prefixes: list[str] = []
    excluded: list[int] = []
    for turn in range(1, 16):
        body = await _chat(
            client,
            [{"role": "user", "content": f"turn {turn} " + "pad " * 20}],
            conversation_id=conversation_id,
            # No message recall: the fake upstream echoes the prompt, recalled text included,
            # and those bigger answers would move the cut every turn.
            context={"max_input_tokens": 400, "memory": False},
        )
        # The turn's own call (background compaction calls the summarizer meanwhile).
        sent = next(
            r["body"]["messages"]
            for r in reversed(fake_upstream.requests())
            if str(r["body"]["messages"][-1].get("content")).startswith("turn ")
        )
        assert body["context_utilization"]["tokens_used"] <= 400
        assert sent[-1]["content"].startswith(f"turn {turn} ")
        prefixes.append(str(sent[0]["content"]))
        excluded.append(body["context_utilization"]["messages_excluded"])
    assert excluded[-1] > 0, "the history outgrew the budget"
    trimmed = [p for p, e in zip(prefixes, excluded, strict=True) if e > 0]
    runs = [trimmed.count(p) for p in dict.fromkeys(trimmed)]
    assert max(runs) >= 2, prefixes
    assert len(set(trimmed)) < len(trimmed)
    # Everything is still stored.
    assert len(await _stored(client, conversation_id)) == 32


async def test_tool_group_is_trimmed_as_a_whole(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    first = await _chat(
        client, [{"role": "user", "content": 'CALL_TOOL:lookup:{"q": "x"}'}], tools=[tool]
    )
    conversation_id = first["conversation_id"]
    call_id = first["choices"][0]["message"]["tool_calls"][0]["id"]
    await _chat(
        client,
        [{"role": "tool", "tool_call_id": call_id, "content": "result " * 60}],
        conversation_id=conversation_id,
        tools=[tool],
    )
    for budget in (60, 120, 200, 260, 400, 2000):
        await _chat(
            client,
            [{"role": "user", "content": "next"}],
            conversation_id=conversation_id,
            context={"max_input_tokens": budget},
        )
        sent = fake_upstream.requests()[-1]["body"]["messages"]
        calls = {c["id"] for m in sent for c in m.get("tool_calls") or []}
        results = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
        assert calls == results, (budget, sent)


async def test_validation_failure_stores_nothing(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user"}]},
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"].startswith("messages")
    assert (await client.get("/v1/conversations")).json()["total"] == 0


def _sse(text: str) -> list[Any]:
    events: list[Any] = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            payload = block[6:]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


async def test_stream_cut_by_the_upstream_ends_with_an_error_and_keeps_the_partial_answer(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults(MODEL, [{"drop_after_chunks": 3}])
    response = await client.post(
        "/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "one two three four five six"}],
            "stream": True,
        },
    )
    assert response.status_code == 200
    events = _sse(response.text)
    assert "error" in events[-1], events[-1]
    assert set(events[-1]["error"]) == {"message", "type", "param", "code"}
    assert "broke off" in events[-1]["error"]["message"]
    assert "[DONE]" not in events
    conversation_id = response.headers["x-conversation-id"]
    stored = await _stored(client, conversation_id)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["status"] == "incomplete"
    partial = "".join(
        e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e.get("choices")
    )
    # What the client saw is what is stored (litellm sometimes loses the chunks buffered when
    # the connection breaks, so the partial answer may be empty).
    assert (stored[1]["content"] or "") == partial


async def test_full_history_after_a_streamed_tool_call_continues_the_conversation(
    client: httpx.AsyncClient,
) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    user = {"role": "user", "content": 'CALL_TOOL:lookup:{"q": "streamed arguments"}'}
    response = await client.post(
        "/v1/chat/completions",
        json={"model": MODEL, "messages": [user], "tools": [tool], "stream": True},
    )
    events = _sse(response.text)
    calls: dict[int, dict[str, Any]] = {}
    for event in events[:-1]:
        for choice in event.get("choices") or []:
            for delta in choice["delta"].get("tool_calls") or []:
                slot = calls.setdefault(
                    delta["index"], {"type": "function", "function": {"arguments": ""}}
                )
                if delta.get("id"):
                    slot["id"] = delta["id"]
                function = delta.get("function") or {}
                if function.get("name"):
                    slot["function"]["name"] = function["name"]
                slot["function"]["arguments"] += function.get("arguments") or ""
    conversation_id = events[-2]["conversation_id"]
    assistant = {"role": "assistant", "content": None, "tool_calls": [calls[0]]}
    result = {"role": "tool", "tool_call_id": calls[0]["id"], "content": "found"}
    body = await _chat(client, [user, assistant, result], tools=[tool])
    assert body["conversation_id"] == conversation_id
    assert [m["role"] for m in await _stored(client, conversation_id)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_a_huge_old_message_ends_the_history_older_ones_are_not_used_to_fill_up(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    """The design's greedy-fit bug, through the whole pipeline: [m1, m2, huge, m4] -> m4 only."""
    first = await _chat(client, [{"role": "user", "content": "small one"}])
    conversation_id = first["conversation_id"]
    fake_upstream.script(MODEL, ["ok"])
    await _chat(
        client, [{"role": "user", "content": "huge " * 400}], conversation_id=conversation_id
    )
    await _chat(
        client, [{"role": "user", "content": "small three"}], conversation_id=conversation_id
    )
    body = await _chat(
        client,
        [{"role": "user", "content": "small four"}],
        conversation_id=conversation_id,
        # The cache-aware fit cutting to exactly the budget: the minimal contiguous tail.
        context={"max_input_tokens": 150, "cache": {"high_water_ratio": 1, "low_water_ratio": 1}},
    )
    sent = [m["content"] for m in fake_upstream.requests()[-1]["body"]["messages"]]
    assert sent[-1].endswith("small four")  # after any recalled messages (message recall)
    assert "small one" not in sent
    assert "Echo: small one" not in sent
    assert all("huge huge" not in str(content) for content in sent)
    # A contiguous tail of what came after the huge message, starting at a user message.
    assert sent[:-1] == ["small three", "Echo: small three"]
    assert body["context_utilization"]["messages_excluded"] >= 3


async def test_the_pipeline_on_every_backend(
    database_url: str,
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
) -> None:
    """Non-stream, stream and a tool round trip stored and rebuilt on SQLite and PostgreSQL."""
    client = await client_for(make_settings(database_url=database_url))
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    user = {"role": "user", "content": 'CALL_TOOL:lookup:{"q": "ü ✓"}'}
    first = await _chat(client, [user], tools=[tool])
    conversation_id = first["conversation_id"]
    call = first["choices"][0]["message"]["tool_calls"][0]
    result = {"role": "tool", "tool_call_id": call["id"], "content": "résultat"}
    await _chat(client, [user, _sdk_echo(first), result], tools=[tool])
    response = await client.post(
        "/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "streamed"}],
            "stream": True,
            "conversation_id": conversation_id,
        },
    )
    assert _sse(response.text)[-1] == "[DONE]"
    stored = await _stored(client, conversation_id)
    assert [m["role"] for m in stored] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert stored[1]["reasoning_steps"][0]["result"] == "résultat"
    assert stored[5]["content"] == "Echo: streamed"
    listed = (await client.get("/v1/conversations")).json()
    assert [c["id"] for c in listed["data"]] == [conversation_id]
    assert listed["data"][0]["message_count"] == 6


async def test_costs_come_from_litellms_map_and_are_zero_for_unknown_models(
    client: httpx.AsyncClient,
) -> None:
    known = await _chat(client, [{"role": "user", "content": "price me"}])
    cost = known["cost"]
    assert cost["prompt_cost"] > 0
    assert cost["completion_cost"] > 0
    assert cost["total_cost"] == pytest.approx(
        cost["prompt_cost"] + cost["completion_cost"] + cost["planning_cost"]
    )
    response = await client.post(
        "/v1/chat/completions",
        json={"model": "fake-model", "messages": [{"role": "user", "content": "price me"}]},
    )
    assert response.status_code == 200, response.text
    assert response.json()["cost"]["total_cost"] == 0
    utilization = response.json()["context_utilization"]
    # Unknown model: the documented default window (8192) minus reserve and margin.
    assert utilization["max_input_tokens"] == 8192 - 1024 - int(8192 * 0.05)
