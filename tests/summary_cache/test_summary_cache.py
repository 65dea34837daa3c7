"""SummaryCache: keys, single-flight, the in-process LRU, Redis (real server), Redis down."""

from __future__ import annotations

import asyncio

import pytest

from app.summary_cache.backends import InProcessBackend, RedisBackend
from app.summary_cache.summary import SummaryCache, summary_key
from tests.support.proxy import free_port


def test_key_depends_on_every_part() -> None:
    base = summary_key("t1", "content", "focus", "m")
    assert base == summary_key("t1", "content", "focus", "m")
    assert base != summary_key("t1", "content", "other focus", "m")
    assert base != summary_key("t2", "content", "focus", "m")
    assert base != summary_key("t1", "content!", "focus", "m")
    assert base != summary_key("t1", "content", "focus", "m2")
    assert summary_key("t1", "c", None, "m") == summary_key("t1", "c", "", "m")
    assert "content" not in base


async def test_concurrent_identical_summaries_run_once() -> None:
    cache = SummaryCache(InProcessBackend())
    calls = 0
    release = asyncio.Event()

    async def produce() -> tuple[str, float]:
        nonlocal calls
        calls += 1
        await release.wait()
        return "the summary", 0.25

    tasks = [asyncio.create_task(cache.get_or_create("k", produce)) for _ in range(5)]
    await asyncio.sleep(0.01)
    release.set()
    results = await asyncio.gather(*tasks)
    assert calls == 1
    assert [r.text for r in results] == ["the summary"] * 5
    assert sum(not r.hit for r in results) == 1
    assert sum(r.cost for r in results) == 0.25
    again = await cache.get_or_create("k", produce)
    assert again.hit
    assert calls == 1


async def test_a_failed_producer_fails_its_waiters_and_caches_nothing() -> None:
    cache = SummaryCache(InProcessBackend())
    release = asyncio.Event()

    async def broken() -> tuple[str, float]:
        await release.wait()
        raise RuntimeError("summarizer down")

    tasks = [asyncio.create_task(cache.get_or_create("k", broken)) for _ in range(3)]
    await asyncio.sleep(0.01)
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)

    async def works() -> tuple[str, float]:
        return "ok", 0.0

    assert not (await cache.get_or_create("k", works)).hit


async def test_in_process_lru_bounds_entries_bytes_and_ttl() -> None:
    backend = InProcessBackend(max_entries=2, max_bytes=10)
    await backend.set("a", "1234", 60)
    await backend.set("b", "5678", 60)
    assert await backend.get("a") == "1234"  # a is now the most recent
    await backend.set("c", "90", 60)
    assert await backend.get("b") is None
    assert len(backend) == 2
    await backend.set("d", "abcdefgh", 60)  # 8 bytes: evicts until <= 10 bytes
    assert backend.size_bytes <= 10
    assert await backend.get("d") == "abcdefgh"
    await backend.set("huge", "x" * 11, 60)
    assert await backend.get("huge") is None
    await backend.set("short", "s", 0)
    assert await backend.get("short") is None


@pytest.mark.redis
async def test_redis_backend_shares_summaries_between_caches(redis_url: str) -> None:
    first = SummaryCache(RedisBackend(redis_url))
    second = SummaryCache(RedisBackend(redis_url))
    calls = 0

    async def produce() -> tuple[str, float]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return "shared summary", 0.1

    try:
        # Two "replicas" at once: the second waits on the first one's lock.
        a, b = await asyncio.gather(
            first.get_or_create("cg:test:k", produce), second.get_or_create("cg:test:k", produce)
        )
        assert calls == 1
        assert {a.hit, b.hit} == {True, False}
        assert a.text == b.text == "shared summary"
        assert a.note is None
        assert b.note is None
        third = await second.get_or_create("cg:test:k", produce)
        assert third.hit
        backend = first.backend
        await backend.set("cg:test:ttl", "v", 1)
        assert await backend.get("cg:test:ttl") == "v"
        await backend.delete("cg:test:ttl")
        assert await backend.get("cg:test:ttl") is None
    finally:
        await first.close()
        await second.close()


async def test_unreachable_redis_is_a_miss_with_a_note() -> None:
    cache = SummaryCache(RedisBackend(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.5))

    async def produce() -> tuple[str, float]:
        return "computed anyway", 0.2

    try:
        result = await cache.get_or_create("k", produce)
    finally:
        await cache.close()
    assert result.text == "computed anyway"
    assert not result.hit
    assert result.note is not None
    assert "redis" in result.note
