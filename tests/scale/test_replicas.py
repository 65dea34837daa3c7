"""Two real `contextgate serve` processes on one PostgreSQL and one Redis.

Concurrent requests to one conversation, spread over both replicas, lose and duplicate nothing
(sequence numbers without gaps, every turn stored once, each answer right after its question);
a turn range is compacted once across replicas; an identical summary is computed once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from app.cli import run_migrations
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import SUMMARY, words
from tests.support.proxy import ContextgateServer

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.e2e]

CONCURRENT = 24


@pytest.fixture(scope="module")
def replicas(
    fake_upstream_server: FakeUpstream,
    postgres_server: Any,
    redis_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[ContextgateServer]]:
    """Two servers for the whole module (each test uses its own conversations)."""
    name = f"cg_replicas_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(name)
    run_migrations(url)  # once, before both start (each would otherwise)
    env = {
        "CONTEXTGATE_DATABASE_URL": url,
        "CONTEXTGATE_REDIS_URL": redis_server.url,
        "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream_server.base_url,
        "CONTEXTGATE_MAX_RETRIES": "0",
        "CONTEXTGATE_PLANNER_MODEL": "fake-planner",
        "CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer",
        "CONTEXTGATE_MEMORY_EXTRACTION_MODE": "off",
        "CONTEXTGATE_SUMMARY_EVERY_PAIRS": "0",  # only compaction calls the summarizer here
    }
    logs = tmp_path_factory.mktemp("replicas")
    servers: list[ContextgateServer] = []
    try:
        for index in range(2):
            servers.append(ContextgateServer(env, log_path=logs / f"replica-{index}.log").start())
        yield servers
    finally:
        for server in servers:
            server.stop()
        redis_server.flush()
        postgres_server.drop_database(name)


async def _chat(
    client: httpx.AsyncClient, server: ContextgateServer, body: dict[str, Any]
) -> dict[str, Any]:
    response = await client.post(f"{server.base_url}/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def _detail(
    client: httpx.AsyncClient, server: ContextgateServer, conversation_id: str
) -> dict[str, Any]:
    response = await client.get(f"{server.base_url}/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _summarizer_calls(fake: FakeUpstream) -> int:
    return sum(
        1
        for r in fake.requests()
        if r["path"].endswith("/chat/completions") and r["body"].get("model") == "fake-summarizer"
    )


async def test_concurrent_turns_on_two_replicas_lose_and_duplicate_nothing(
    replicas: list[ContextgateServer],
) -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        first = await _chat(
            client,
            replicas[0],
            {"model": "fake-model", "messages": [{"role": "user", "content": "start"}]},
        )
        conversation_id = first["conversation_id"]
        bodies = [
            {
                "model": "fake-model",
                "conversation_id": conversation_id,
                "messages": [{"role": "user", "content": f"question {i}"}],
            }
            for i in range(CONCURRENT)
        ]
        answers = await asyncio.gather(
            *(_chat(client, replicas[i % 2], body) for i, body in enumerate(bodies))
        )
        assert {a["conversation_id"] for a in answers} == {conversation_id}
        detail = await _detail(client, replicas[1], conversation_id)

    messages = detail["messages"]
    assert [m["sequence_number"] for m in messages] == list(range(2 + 2 * CONCURRENT))
    questions = [m["content"] for m in messages if m["role"] == "user"]
    assert sorted(questions) == sorted(["start", *(f"question {i}" for i in range(CONCURRENT))])
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        assert question["role"] == "user"
        assert answer == {**answer, "role": "assistant", "content": f"Echo: {question['content']}"}
    assert [m["turn_number"] for m in messages[::2]] == list(range(1, CONCURRENT + 2))


async def test_a_turn_range_is_compacted_once_across_replicas(
    replicas: list[ContextgateServer], fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script("fake-summarizer", [SUMMARY] * 50)
    async with httpx.AsyncClient(trust_env=False) as client:
        conversation_id = None
        for i in range(10):  # a long conversation, not compacted yet (nothing is due)
            body: dict[str, Any] = {
                "model": "fake-model",
                "messages": [{"role": "user", "content": f"turn {i} " + words(20, "w")}],
                "context": {"compaction_ratio": 1.0},
            }
            if conversation_id:
                body["conversation_id"] = conversation_id
            conversation_id = (await _chat(client, replicas[0], body))["conversation_id"]
        assert _summarizer_calls(fake_upstream) == 0
        # Now a small window makes compaction due on every request, on both replicas at once.
        bodies = [
            {
                "model": "fake-model",
                "conversation_id": conversation_id,
                "messages": [{"role": "user", "content": f"more {i} " + words(20, "m")}],
                "context": {"max_input_tokens": 600},
            }
            for i in range(6)
        ]
        await asyncio.gather(
            *(_chat(client, replicas[i % 2], body) for i, body in enumerate(bodies))
        )
        # Background compaction after the answers: wait until the summarizer is quiet.
        deadline, last = time.monotonic() + 20, -1
        while time.monotonic() < deadline:
            calls = _summarizer_calls(fake_upstream)
            if calls == last:
                break
            last = calls
            await asyncio.sleep(1.0)
        assert conversation_id is not None
        detail = await _detail(client, replicas[1], conversation_id)

    summaries = detail["summaries"]
    assert summaries, "compaction never ran"
    raw = sorted((s for s in summaries if s["level"] == 0), key=lambda s: s["first_turn"])
    for before, after in zip(raw, raw[1:], strict=False):
        assert after["first_turn"] > before["last_turn"], raw  # no turn summarized twice
    # Every summarizer call became a stored summary: none was computed twice and thrown away.
    assert _summarizer_calls(fake_upstream) == len(summaries)
    assert len(detail["messages"]) == 2 * 16  # raw messages are never touched


async def test_an_identical_summary_is_computed_once_across_replicas(
    replicas: list[ContextgateServer], fake_upstream: FakeUpstream
) -> None:
    plan = {"artifacts": [{"artifact_id": "inline_0", "strategy": "summarize", "priority": 1}]}
    fake_upstream.script("fake-planner", [orjson.dumps(plan).decode()] * 2)
    fake_upstream.script(
        "fake-summarizer", [{"content": "SUMMARY: the vault code is 4471.", "delay_ms": 300}]
    )
    document = "The vault code is 4471. " + words(1500, "filler")
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "What is the vault code?"}],
        "attachments": [{"content": document}],
        "context": {"planning": "always"},
    }
    async with httpx.AsyncClient(trust_env=False) as client:
        results = await asyncio.gather(*(_chat(client, server, body) for server in replicas))
    outcomes = [r["context_utilization"]["artifacts_processed"][0] for r in results]
    assert [o["strategy"] for o in outcomes] == ["summarize", "summarize"]
    assert sorted(o["cache_hit"] for o in outcomes) == [False, True]
    assert _summarizer_calls(fake_upstream) == 1
