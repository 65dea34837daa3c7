"""Compaction against the fake upstream: long conversations, failures, one compaction at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.compaction.locks import ConversationLocks
from app.core.settings import Settings
from app.db.models import Conversation, ConversationSummaryRow
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import SUMMARY, app_state, chat, drain, upstream_chats, words

# The previous history fit: compaction's raw tail is sent whole (the cache-aware fit cuts
# deeper, down to its low-water mark; see tests/context/test_cache_*).
# compaction_ratio 1: no compaction in the background, so the request that no longer fits
# compacts, and reports it.
SMALL = {"max_input_tokens": 600, "cache": {"enabled": False}, "compaction_ratio": 1.0}
NO_TRIGGER = {"compaction_ratio": 1.0, "summary_every_pairs": 0}  # no background summarizer calls


async def long_conversation(
    client: httpx.AsyncClient, turns: int, context: dict[str, Any] | None = None
) -> str:
    conversation_id = None
    for i in range(turns):
        result = await chat(
            client,
            f"turn {i} " + words(20, "w"),
            conversation_id=conversation_id,
            system="You are terse." if conversation_id is None else None,
            context=context,
        )
        conversation_id = result["conversation_id"]
    return str(conversation_id)


async def compaction_state(client: httpx.AsyncClient, conversation_id: str) -> tuple[Any, ...]:
    state = app_state(client)
    async with state.database.reading() as session:
        conversation = await session.get(Conversation, conversation_id)
        assert conversation is not None
        summaries = await session.scalar(select(func.count()).select_from(ConversationSummaryRow))
    return (
        conversation.compacted_turn,
        conversation.compacted_sequence,
        conversation.compacted_tokens,
        summaries,
    )


async def test_long_conversation_keeps_raw_tail_summary_and_every_message(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
) -> None:
    # No message recall: the fake upstream echoes the prompt, so recalled text would be stored in
    # every answer and crowd out the raw tail this test counts.
    settings = make_settings(
        summarizer_model="fake-summarizer", database_url=database_url, message_recall=False
    )
    client = await client_for(settings)
    fake_upstream.script("fake-summarizer", [SUMMARY] * 40)
    conversation_id = None
    compactions = []
    for i in range(14):
        result = await chat(
            client,
            f"turn {i} " + words(20, "w"),
            conversation_id=conversation_id,
            system="You are terse." if conversation_id is None else None,
            context=SMALL,
        )
        conversation_id = result["conversation_id"]
        utilization = result["context_utilization"]
        assert utilization["tokens_used"] <= 600
        if utilization["compaction"]:
            compactions.append(utilization["compaction"])
            assert utilization["planning_cost"]["summarizer_cost"] >= 0
        await drain(client)
    assert compactions
    assert compactions[0]["turns_compacted"] >= 1
    assert compactions[0]["tokens_after"] < compactions[0]["tokens_before"]

    sent = upstream_chats(fake_upstream)[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "You are terse."}
    assert sent[1]["role"] == "system"
    assert sent[1]["content"].startswith("[MEMORY:EPISODIC]\n(turns 1-")
    assert (
        "[MEMORY:SEMANTIC]\n- (fact, importance 6) The user is counting turns" in sent[1]["content"]
    )
    user_texts = [m["content"].split(" ")[1] for m in sent if m["role"] == "user"]
    assert user_texts == ["9", "10", "11", "12", "13"]  # raw tail of 4 turns + the new one
    assert result["context_utilization"]["breakdown"]["memory"] > 0

    detail = (await client.get(f"/v1/conversations/{conversation_id}")).json()
    assert len(detail["messages"]) == 1 + 2 * 14  # nothing dropped from the record
    assert [m["turn_number"] for m in detail["messages"][1:3]] == [1, 1]
    active = [s for s in detail["summaries"] if s["merged_into"] is None]
    assert active
    assert active[-1]["last_turn"] == 9
    assert all(s["episodic"] for s in detail["summaries"])


async def test_failed_summarizer_changes_nothing_and_the_next_request_retries(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
) -> None:
    settings = make_settings(summarizer_model="fake-summarizer", database_url=database_url)
    client = await client_for(settings)
    conversation_id = await long_conversation(client, 8, NO_TRIGGER)
    before = await compaction_state(client, conversation_id)
    assert before == (0, 0, 0, 0)

    fake_upstream.script("fake-summarizer", ['{"episodic": ""}'])  # invalid: empty summary
    result = await chat(
        client,
        "after " + words(20, "x"),
        conversation_id=conversation_id,
        context={**SMALL, **NO_TRIGGER},
    )
    utilization = result["context_utilization"]
    assert utilization["compaction"]["error"]
    assert any("compaction failed" in note for note in utilization["notes"])
    assert utilization["tokens_used"] <= 600  # the plain fit
    assert await compaction_state(client, conversation_id) == before

    fake_upstream.faults("fake-summarizer", [{"status": 500}])
    result = await chat(
        client,
        "again " + words(20, "y"),
        conversation_id=conversation_id,
        context={**SMALL, **NO_TRIGGER},
    )
    assert result["context_utilization"]["compaction"]["error"]
    assert await compaction_state(client, conversation_id) == before

    fake_upstream.script("fake-summarizer", [SUMMARY])
    result = await chat(
        client,
        "third " + words(20, "z"),
        conversation_id=conversation_id,
        context={**SMALL, **NO_TRIGGER},
    )
    compaction = result["context_utilization"]["compaction"]
    assert compaction["error"] is None
    assert compaction["turns_compacted"] >= 1
    after = await compaction_state(client, conversation_id)
    assert after[0] >= 1
    assert after[3] == 1


async def _two_requests_compact_once(
    clients: list[httpx.AsyncClient], fake_upstream: FakeUpstream
) -> None:
    conversation_id = await long_conversation(clients[0], 8, NO_TRIGGER)
    fake_upstream.script("fake-summarizer", [{"content": SUMMARY, "delay_ms": 300}, SUMMARY])
    results = await asyncio.gather(
        *(
            chat(
                client,
                f"parallel {i} " + words(20, "p"),
                conversation_id=conversation_id,
                context={**SMALL, **NO_TRIGGER},
            )
            for i, client in enumerate(clients)
        )
    )
    calls = [r for r in fake_upstream.requests() if r["body"].get("model") == "fake-summarizer"]
    assert len(calls) == 1
    assert sum(1 for r in results if r["context_utilization"]["compaction"]) == 1
    state = await compaction_state(clients[0], conversation_id)
    assert state[3] == 1
    for result in results:  # both requests start from the one new boundary
        assert result["context_utilization"]["breakdown"]["memory"] > 0


async def test_two_concurrent_requests_compact_once_in_process(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(summarizer_model="fake-summarizer"))
    assert app_state(client).memory is None or True
    await _two_requests_compact_once([client, client], fake_upstream)


@pytest.mark.redis
async def test_two_replicas_compact_once_with_the_redis_lock(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    redis_url: str,
) -> None:
    settings = make_settings(summarizer_model="fake-summarizer", redis_url=redis_url)
    replicas = [await client_for(settings), await client_for(settings)]  # separate processes' locks
    await _two_requests_compact_once(replicas, fake_upstream)


@pytest.mark.redis
async def test_redis_lock_excludes_a_second_holder(redis_url: str) -> None:
    import redis.asyncio as redis_asyncio

    clients = [redis_asyncio.Redis.from_url(redis_url) for _ in range(2)]
    try:
        first, second = (ConversationLocks(redis=c) for c in clients)
        async with first.hold("conv_x", timeout_s=1) as held:
            assert held
            assert first.backend == "redis"
            async with second.hold("conv_x", timeout_s=None) as other:
                assert not other
            async with second.hold("conv_x", timeout_s=0.1) as other:
                assert not other
        async with second.hold("conv_x", timeout_s=None) as other:
            assert other
    finally:
        for c in clients:
            await c.aclose()


@pytest.mark.postgres
async def test_postgres_advisory_lock_excludes_a_second_holder(
    postgres_database_url: str,
) -> None:
    from app.core.database import create_database

    databases = [create_database(postgres_database_url) for _ in range(2)]
    try:
        first, second = (ConversationLocks(engine=d.engine, use_advisory=True) for d in databases)
        async with first.hold("conv_y", timeout_s=1) as held:
            assert held
            assert first.backend == "postgres"
            async with second.hold("conv_y", timeout_s=0.1) as other:
                assert not other
        async with second.hold("conv_y", timeout_s=None) as other:
            assert other
    finally:
        for d in databases:
            await d.dispose()


async def test_background_compaction_after_a_full_response(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(summarizer_model="fake-summarizer"))
    conversation_id = await long_conversation(client, 7, NO_TRIGGER)
    fake_upstream.script("fake-summarizer", [SUMMARY])
    # The fake reports ~len/4 prompt tokens: well over 0.05 x 4000 here.
    result = await chat(
        client,
        "trigger " + words(5, "t"),
        conversation_id=conversation_id,
        context={"max_input_tokens": 4000, "compaction_ratio": 0.05},
    )
    assert result["context_utilization"]["compaction"] is None  # nothing before the request
    await drain(client)
    turn, _sequence, tokens, summaries = await compaction_state(client, conversation_id)
    assert summaries == 1
    assert turn == 8 - 4
    assert tokens > 0
