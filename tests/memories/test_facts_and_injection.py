"""Key/value user facts (seed 004) and the injected block (seed 003): upsert and supersede
through the HTTP API, facts in full ahead of retrieved memories within the token cap, the
deployment's line template with type, importance and age, per-request memory_top_k and
memory_min_similarity, and the date prefix on every request."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.core.settings import Settings, SettingsError, load_settings
from app.recall.render import RECALL_HEADER
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import chat, upstream_chats

STAMP = re.compile(r"^\[CONTEXT: \d{4}-\d\d-\d\d \d\d:\d\d UTC\]")


async def post(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post("/v1/memories", json=body)


async def memories(client: httpx.AsyncClient, user: str, **params: Any) -> list[dict[str, Any]]:
    response = await client.get("/v1/memories", params={"user": user, **params})
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def sent_user_text(fake: FakeUpstream) -> str:
    messages = upstream_chats(fake)[-1]["messages"]
    return str([m for m in messages if m["role"] == "user"][-1]["content"])


async def test_key_value_fact_upserts_by_key_and_keeps_the_old_value_in_history(
    client: httpx.AsyncClient,
) -> None:
    first = (await post(client, user="ann", key="city", value="Paris")).json()
    assert first["key"] == "city"
    assert first["content"] == "Paris"
    assert first["memory_type"] == "fact"
    same = (await post(client, user="ann", key="city", value="Paris", importance=9)).json()
    assert same["id"] == first["id"]  # the same value again only refreshes it
    assert same["importance"] == 9
    moved = (await post(client, user="ann", key="city", value="Berlin")).json()
    assert moved["id"] != first["id"]
    other_user = (await post(client, user="ben", key="city", value="Rome")).json()

    active = await memories(client, "ann")
    assert [(m["key"], m["content"]) for m in active] == [("city", "Berlin")]
    history = await memories(client, "ann", include_superseded=True)
    old = next(m for m in history if m["id"] == first["id"])
    assert old["superseded_by"] == moved["id"]
    assert old["content"] == "Paris"
    assert [m["id"] for m in await memories(client, "ben")] == [other_user["id"]]

    # A free-text memory that reads like the fact does not touch it (facts change by key only).
    note = (await post(client, user="ann", content="Berlin")).json()
    assert note["key"] is None
    assert note["id"] != moved["id"]
    assert {m["id"] for m in await memories(client, "ann")} == {moved["id"], note["id"]}


@pytest.mark.parametrize(
    "body",
    [
        {"user": "ann", "key": "city"},
        {"user": "ann", "value": "Paris"},
        {"user": "ann", "key": "city", "value": "Paris", "content": "Paris"},
        {"user": "ann", "key": "  ", "value": "Paris"},
        {"user": "ann", "key": "city", "value": "Paris", "supersedes": ["mem_x"]},
        {"user": "ann"},
    ],
)
async def test_a_malformed_fact_is_400_and_nothing_is_stored(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    response = await client.post("/v1/memories", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert await memories(client, "ann", include_superseded=True) == []


async def test_facts_go_in_full_ahead_of_retrieved_memories_with_type_importance_and_age(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    await post(client, user="cy", key="favorite_drink", value="green tea", importance=6)
    memory = (
        await post(
            client, user="cy", content="Cy chose PostgreSQL for the billing service",
            memory_type="decision", importance=7,
        )
    ).json()  # fmt: skip
    await post(client, user="cy", content="Cy dislikes meetings", memory_type="preference")

    result = await chat(client, "Which database for billing service?", user="cy")
    text = sent_user_text(fake_upstream)
    assert STAMP.match(text)
    block, question = text.split("\n\n", 1)
    assert question == "Which database for billing service?"
    assert block.splitlines()[1:] == [
        "Facts about the user:",
        "- [fact, importance 6, just now] favorite_drink: green tea",
        "Relevant memories:",
        "- [decision, importance 7, just now] Cy chose PostgreSQL for the billing service",
    ]
    injected = result["context_utilization"]["memories_injected"]
    assert injected[0]["key"] == "favorite_drink"
    assert injected[1]["id"] == memory["id"]
    assert injected[1]["similarity"] > 0

    # A question no memory matches still gets the facts (they are not retrieved by similarity).
    # (Cross-session message recall may bring back the fake's echo of the first turn, which quotes
    # the first block; its vectors are written in the background, so it may or may not be there.)
    hello = await chat(client, "Hello there", user="cy")
    memory_block = sent_user_text(fake_upstream).split(RECALL_HEADER)[0]
    assert "favorite_drink: green tea" in memory_block
    assert "Relevant memories" not in memory_block
    assert [m.get("key") for m in hello["context_utilization"]["memories_injected"]] == [
        "favorite_drink"
    ]


async def test_facts_fill_the_token_cap_before_memories(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(memory_token_cap=30))
    await post(client, user="di", content="Di keeps bees in the garden", importance=9)
    await post(client, user="di", key="name", value="Diana Prince")
    await post(client, user="di", key="job", value="beekeeper " + "very " * 30)
    result = await chat(client, "Tell me about the bees in the garden", user="di")
    text = sent_user_text(fake_upstream)
    assert "name: Diana Prince" in text
    assert "beekeeper" not in text  # that fact alone is over the cap: left out, and said so
    assert "Di keeps bees" not in text  # 15 of 30 tokens left: too few for the memory (17)
    assert any(
        "did not fit the memory token cap" in n for n in result["context_utilization"]["notes"]
    )


async def test_per_request_top_k_and_min_similarity(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    for text in (
        "The chess club meets on Sundays",
        "Ed's chess rating is 1800",
        "Ed's chess coach is Anna",
        "Ed grows tomatoes",
        "Ed drives a Volvo",
    ):
        await post(client, user="ed", content=text, importance=9)
    result = await chat(client, "How good is he at chess?", user="ed")
    assert len(result["context_utilization"]["memories_injected"]) == 3
    result = await chat(client, "How good is he at chess?", user="ed", context={"memory_top_k": 1})
    assert len(result["context_utilization"]["memories_injected"]) == 1
    strict = await chat(
        client, "How good is he at chess?", user="ed", context={"memory_min_similarity": 0.99}
    )
    assert strict["context_utilization"]["memories_injected"] == []
    assert sent_user_text(fake_upstream) == "How good is he at chess?"
    bad = await client.post(
        "/v1/chat/completions",
        json={
            "model": "fake-model",
            "messages": [{"role": "user", "content": "x"}],
            "context": {"memory_top_k": 0},
        },
    )
    assert bad.status_code == 400


async def test_the_template_is_a_setting_and_the_date_prefix_an_option(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(
        make_settings(memory_template="{type}/{importance} ({date}, {age}): {content}")
    )
    await post(client, user="flo", content="Flo runs marathons", memory_type="fact")
    await chat(client, "How far does Flo run marathons?", user="flo")
    line = sent_user_text(fake_upstream).splitlines()[2]
    assert re.fullmatch(r"- fact/5 \(\d{4}-\d\d-\d\d, just now\): Flo runs marathons", line)

    # No user, no memory: nothing unless the date prefix is asked for.
    await chat(client, "What day is it?")
    assert sent_user_text(fake_upstream) == "What day is it?"
    result = await chat(client, "What day is it?", context={"date_prefix": True})
    text = sent_user_text(fake_upstream)
    assert STAMP.match(text)
    assert text.endswith("]\n\nWhat day is it?")
    assert result["context_utilization"]["breakdown"]["memory"] > 0

    dated = await client_for(make_settings(date_prefix=True))
    await chat(dated, "And now?")
    assert STAMP.match(sent_user_text(fake_upstream))
    await chat(dated, "And now, without?", context={"date_prefix": False})
    assert sent_user_text(fake_upstream) == "And now, without?"


def test_a_template_with_an_unknown_field_stops_the_server_with_one_line() -> None:
    with pytest.raises(SettingsError, match=r"MEMORY_TEMPLATE: unknown field \{score\}"):
        load_settings(memory_template="{score} {content}", _env_file=None)
