"""The context engine end to end: the OpenAI SDK (extra_body) → contextgate in-process →
the fake upstream serving the primary model, the planner and the summarizer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.support.models import fake_model_list

# Past turns' tool results are reprocessed by the engine only without the cache-aware fit
# (which keeps history byte-stable and clears old results instead: tests/context/test_cache_*).
NO_CACHE: dict[str, Any] = {"cache": {"enabled": False}}
PRICE = {"input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002}


@pytest.fixture
async def sdk(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> openai.AsyncOpenAI:
    settings = make_settings(
        planner_model="fake-planner",
        summarizer_model="fake-summarizer",
        config=fake_model_list(tmp_path, fake_upstream, model_info=PRICE),
    )
    http: httpx.AsyncClient = await client_for(settings)
    return openai.AsyncOpenAI(base_url="http://contextgate/v1", api_key="sk-x", http_client=http)


def _extras(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = response.model_dump()
    return data


def _sent(fake: FakeUpstream, model: str) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests() if (r["body"] or {}).get("model") == model]


DOC = "\n\n".join(
    [f"Section {i}: the orchard grows apples and pears in row {i}." for i in range(150)]
    + ["The vault code is 4471."]
)


async def test_inline_attachment_goes_into_one_block_before_the_question(
    sdk: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    response = await sdk.chat.completions.create(
        model="fake-model",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What does the memo say about the launch?"},
        ],
        extra_body={
            "attachments": [{"content": "Memo: the launch is on Tuesday.", "title": "memo"}]
        },
    )
    data = _extras(response)
    usage = data["context_utilization"]
    assert usage["strategy"] == "deterministic"
    assert usage["llm_planning_used"] is False
    [outcome] = usage["artifacts_processed"]
    assert outcome["artifact_id"] == "inline_0"
    assert outcome["strategy"] == "include_full"
    assert outcome["artifact_type"] == "document"
    assert usage["breakdown"]["artifacts"] > 0
    sent = _sent(fake_upstream, "fake-model")[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert sent[1]["role"] == "user"
    assert sent[1]["content"].startswith("<contextgate_context>")
    assert "the launch is on Tuesday" in sent[1]["content"]
    assert sent[2]["content"] == "What does the memo say about the launch?"


async def test_stored_attachment_planner_summarizer_and_cache_hit(
    sdk: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    http = sdk._client
    stored = (await http.post("http://contextgate/v1/attachments", json={"content": DOC})).json()
    plan = {
        "artifacts": [
            {
                "artifact_id": stored["id"],
                "strategy": "summarize",
                "priority": 1,
                "summarization_focus": "vault code",
            }
        ],
        "reasoning": "long document",
    }
    fake_upstream.script("fake-planner", [orjson.dumps(plan).decode()] * 2)
    fake_upstream.script("fake-summarizer", ["SUMMARY: the vault code is 4471."])
    request = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "What is the vault code?"}],
        "extra_body": {
            "attachments": [{"attachment_id": stored["id"]}],
            "context": {"planning": "always"},
        },
    }
    first = _extras(await sdk.chat.completions.create(**request))
    usage = first["context_utilization"]
    assert usage["strategy"] == "llm_planning"
    assert usage["llm_planning_used"] is True
    [outcome] = usage["artifacts_processed"]
    assert outcome["artifact_id"] == stored["id"]
    assert outcome["strategy"] == "summarize"
    assert outcome["cache_hit"] is False
    assert outcome["processed_size_chars"] < outcome["original_size_chars"]
    assert (usage["cache_stats"]["hits"], usage["cache_stats"]["misses"]) == (0, 1)
    cost = usage["planning_cost"]
    assert cost["planner_cost"] > 0
    assert cost["summarizer_cost"] > 0
    assert cost["total_cost"] == pytest.approx(cost["planner_cost"] + cost["summarizer_cost"])
    assert first["cost"]["planning_cost"] == pytest.approx(cost["total_cost"])
    assert first["cost"]["total_cost"] >= cost["total_cost"]
    primary = _sent(fake_upstream, "fake-model")[-1]["messages"]
    assert "SUMMARY: the vault code is 4471." in primary[0]["content"]
    planner_call = _sent(fake_upstream, "fake-planner")[-1]
    assert planner_call["response_format"]["type"] == "json_object"
    assert "<artifact_preview" in planner_call["messages"][1]["content"]

    second = _extras(await sdk.chat.completions.create(**request))
    usage = second["context_utilization"]
    assert usage["artifacts_processed"][0]["cache_hit"] is True
    assert (usage["cache_stats"]["hits"], usage["cache_stats"]["misses"]) == (1, 0)
    assert usage["planning_cost"]["summarizer_cost"] == 0
    assert len(_sent(fake_upstream, "fake-summarizer")) == 1


async def test_current_tool_results_stay_tool_messages_with_processed_content(
    sdk: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    huge = DOC * 3
    messages = [
        {"role": "user", "content": "Look up the vault code, please."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "search", "arguments": "{}"},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "weather", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": huge},
        {"role": "tool", "tool_call_id": "call_b", "content": "sunny " * 2000},
    ]
    response = await sdk.chat.completions.create(
        model="fake-model",
        messages=messages,  # type: ignore[arg-type]
        extra_body={"context": {"max_input_tokens": 1500, "planning": "never"}},
    )
    usage = _extras(response)["context_utilization"]
    by_id = {o["artifact_id"]: o for o in usage["artifacts_processed"]}
    assert by_id["call_a"]["strategy"] == "rag_extract"
    assert by_id["call_a"]["source"] == "tool:search"
    assert by_id["call_b"]["strategy"] == "exclude"
    assert usage["tokens_used"] <= 1500
    sent = _sent(fake_upstream, "fake-model")[-1]["messages"]
    tools = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert set(tools) == {"call_a", "call_b"}
    assert "4471" in tools["call_a"]
    assert tools["call_b"].startswith("[excluded by contextgate:")
    # What is stored is what the client sent.
    conversation = _extras(response)["conversation_id"]
    stored = (await sdk._client.get(f"http://contextgate/v1/conversations/{conversation}")).json()
    assert any(m["content"] == huge for m in stored["messages"])


def _history_with_tool(result: str) -> list[dict[str, Any]]:
    call = {
        "id": "call_h",
        "type": "function",
        "function": {"name": "web_search", "arguments": "{}"},
    }
    return [
        {"role": "user", "content": "Search the orchard report."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_h", "content": result},
        {"role": "assistant", "content": "Found it."},
        {"role": "user", "content": "So what is the vault code?"},
    ]


async def test_historical_tool_results_and_a_failing_planner(
    sdk: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults("fake-planner", [{"status": 500, "message": "planner down"}])
    response = await sdk.chat.completions.create(
        model="fake-model",
        messages=_history_with_tool(DOC),  # type: ignore[arg-type]
        extra_body={"context": {"max_input_tokens": 1200, **NO_CACHE}},
    )
    usage = _extras(response)["context_utilization"]
    [outcome] = usage["artifacts_processed"]
    assert outcome["source"] == "history:msg_2:web_search"
    assert outcome["artifact_type"] == "tool_result"
    assert outcome["strategy"] in ("rag_extract", "exclude")
    assert usage["strategy"] == "deterministic"
    assert usage["llm_planning_used"] is False
    assert any("planner failed" in note for note in usage["notes"])
    sent = _sent(fake_upstream, "fake-model")[-1]["messages"]
    tool = next(m for m in sent if m["role"] == "tool")
    assert tool["tool_call_id"] == "call_h"
    assert len(tool["content"]) < len(DOC)


async def test_planner_garbage_falls_back_and_says_why(
    sdk: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script("fake-planner", ["this is not json"])
    response = await sdk.chat.completions.create(
        model="fake-model",
        messages=_history_with_tool("The vault code is 4471."),  # type: ignore[arg-type]
        extra_body={"context": NO_CACHE},
    )
    usage = _extras(response)["context_utilization"]
    assert usage["strategy"] == "deterministic"
    assert any("invalid JSON" in note for note in usage["notes"])
    assert usage["artifacts_processed"][0]["strategy"] == "include_full"


async def test_unknown_attachment_is_404_and_missing_content_400(
    sdk: openai.AsyncOpenAI,
) -> None:
    with pytest.raises(openai.NotFoundError):
        await sdk.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"attachments": [{"attachment_id": "att_missing"}]},
        )
    with pytest.raises(openai.BadRequestError):
        await sdk.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"attachments": [{"title": "empty"}]},
        )


@pytest.mark.redis
async def test_two_replicas_share_summaries_through_redis(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    redis_url: str,
) -> None:
    settings = make_settings(
        planner_model="fake-planner", summarizer_model="fake-summarizer", redis_url=redis_url
    )
    replicas = [await client_for(settings), await client_for(settings)]
    plan = {"artifacts": [{"artifact_id": "inline_0", "strategy": "summarize", "priority": 1}]}
    fake_upstream.script("fake-planner", [orjson.dumps(plan).decode()] * 2)
    fake_upstream.script("fake-summarizer", ["SUMMARY from replica one"])
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "What is the vault code?"}],
        "attachments": [{"content": DOC}],
        "context": {"planning": "always"},
    }
    hits = []
    for replica in replicas:
        response = await replica.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        outcome = response.json()["context_utilization"]["artifacts_processed"][0]
        assert outcome["strategy"] == "summarize"
        hits.append(outcome["cache_hit"])
    assert hits == [False, True]
    assert len(_sent(fake_upstream, "fake-summarizer")) == 1
    assert (
        "SUMMARY from replica one"
        in _sent(fake_upstream, "fake-model")[-1]["messages"][0]["content"]
    )


async def test_streamed_answer_reports_the_artifacts_in_its_metadata_chunk(
    sdk: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    stream = await sdk.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "What is the vault code?"}],
        stream=True,
        extra_body={
            "attachments": [{"content": DOC, "title": "orchard"}],
            "context": {"max_input_tokens": 800, "planning": "never"},
        },
    )
    chunks = [chunk.model_dump() async for chunk in stream]
    final = chunks[-1]
    assert final["choices"] == []
    usage = final["context_utilization"]
    assert usage["artifacts_processed"][0]["strategy"] == "rag_extract"
    assert usage["tokens_used"] <= 800
    sent = _sent(fake_upstream, "fake-model")[-1]["messages"]
    assert "4471" in sent[0]["content"]


async def test_a_hanging_planner_times_out_into_the_deterministic_plan(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(planner_model="fake-planner", planner_timeout_s=0.3))
    fake_upstream.faults("fake-planner", [{"hang": True}])
    response = await client.post(
        "/v1/chat/completions",
        json={
            "model": "fake-model",
            "messages": [{"role": "user", "content": "What is the vault code?"}],
            "attachments": [{"content": "The vault code is 4471."}],
            "context": {"planning": "always"},
        },
    )
    assert response.status_code == 200, response.text
    usage = response.json()["context_utilization"]
    assert usage["strategy"] == "deterministic"
    assert usage["llm_planning_used"] is False
    assert any("planner failed" in note for note in usage["notes"])
    assert usage["artifacts_processed"][0]["strategy"] == "include_full"


async def test_stored_tool_results_of_earlier_turns_become_historical_artifacts(
    sdk: openai.AsyncOpenAI, fake_upstream: FakeUpstream
) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": 'CALL_TOOL:lookup:{"q": "vault"}'}
    ]
    first = await sdk.chat.completions.create(
        model="fake-model",
        messages=messages,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
    )
    call = first.choices[0].message.model_dump(exclude_none=True)
    messages += [
        call,
        {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": DOC},
    ]
    second = await sdk.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    current = _extras(second)["context_utilization"]["artifacts_processed"]
    assert [o["source"] for o in current] == ["tool:lookup"]
    messages += [
        second.choices[0].message.model_dump(exclude_none=True),
        {"role": "user", "content": "Remind me: what is the vault code?"},
    ]
    fake_upstream.script("fake-planner", ["{}"])  # not a plan: deterministic, with a note
    third = _extras(
        await sdk.chat.completions.create(
            model="fake-model",
            messages=messages,  # type: ignore[arg-type]
            extra_body={"context": {"max_input_tokens": 1500, **NO_CACHE}},
        )
    )
    assert third["conversation_id"] == _extras(second)["conversation_id"]
    usage = third["context_utilization"]
    [outcome] = usage["artifacts_processed"]
    assert outcome["source"] == "history:msg_2:lookup"
    assert outcome["artifact_type"] == "tool_result"
    assert any("planner failed" in n for n in usage["notes"])
    sent = _sent(fake_upstream, "fake-model")[-1]["messages"]
    tool = next(m for m in sent if m["role"] == "tool")
    assert "4471" in tool["content"]
    assert len(tool["content"]) < len(DOC)
