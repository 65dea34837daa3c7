"""The provider's tokens: the ratio learned from usage, shared through the database."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import event

from app.core.database import create_database
from app.tokens.calibration import (
    MIN_SAMPLE_TOKENS,
    Calibration,
    TokenCalibration,
    folded,
    sample_ratio,
)


def test_a_sample_is_the_reported_over_our_own_count() -> None:
    assert sample_ratio(10_000, 12_000) == pytest.approx(1.2)
    assert sample_ratio(MIN_SAMPLE_TOKENS - 1, 5_000) is None  # fixed overheads dominate
    assert sample_ratio(10_000, None) is None
    assert sample_ratio(10_000, 100) is None  # 0.01: a miscount, not a tokenizer


def test_the_estimate_averages_first_then_moves_slowly() -> None:
    value = Calibration()
    for sample in (1.3, 1.2, 1.25):
        value = folded(value, sample)
    assert value.ratio == pytest.approx(1.25)
    assert value.samples == 3
    for _ in range(40):
        value = folded(value, 1.35)
    assert value.ratio == pytest.approx(1.35, abs=0.01)


def test_own_budget_is_the_provider_budget_in_our_tokens() -> None:
    assert Calibration(1.25, 9).own_budget(100_000) == 80_000
    assert Calibration().own_budget(100_000) == 100_000


async def test_samples_are_shared_through_the_database(database_url: str) -> None:
    """Two processes (two TokenCalibration on one database) learn one ratio."""
    first_db, second_db = create_database(database_url), create_database(database_url)
    first, second = TokenCalibration(first_db), TokenCalibration(second_db, refresh_s=0)
    try:
        assert await first.get("claude") == Calibration()
        for sample in (1.2, 1.3):
            async with first_db.writing() as session:
                await first.record(session, "claude", sample)
        async with second_db.writing() as session:
            await second.record(session, "claude", 1.25)
        shared = await second.get("claude")
        assert shared.samples == 3
        assert shared.ratio == pytest.approx(1.25)
        assert (await first.stored("claude")) == shared
        assert (await second.get("gpt-4o")) == Calibration()  # per model
    finally:
        await first_db.dispose()
        await second_db.dispose()


async def test_observed_samples_reach_the_database_in_the_background(sqlite_url: str) -> None:
    """A request only observes; the shared estimate is written soon after, off its path."""
    database = create_database(sqlite_url)
    calibration = TokenCalibration(database, flush_s=0.05)
    try:
        await calibration.get("claude")
        calibration.observe("claude", 1.3)
        calibration.observe("claude", 1.2)
        assert (await calibration.get("claude")).ratio == pytest.approx(1.25)  # at once, here
        for _ in range(100):
            if (await calibration.stored("claude")).samples == 2:
                break
            await asyncio.sleep(0.05)
        assert await calibration.stored("claude") == Calibration(pytest.approx(1.25), 2)
    finally:
        await calibration.close()
        await database.dispose()


async def test_a_flush_writes_each_model_once_however_many_samples(database_url: str) -> None:
    """A flush reads and writes a model's row once (it used to run one UPDATE per sample),
    and stores what folding the samples one by one gives."""
    database = create_database(database_url)
    calibration = TokenCalibration(database, flush_s=60)
    statements: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "token_calibration" in statement:
            statements.append(statement.split()[0])

    try:
        samples = [1.1, 1.3, 1.2, 1.25, 1.4, 1.35, 1.3, 1.2]
        for sample in samples[:3]:
            calibration.observe("claude", sample)
        await calibration.flush()  # no row yet: read, then insert
        for sample in samples[3:]:
            calibration.observe("claude", sample)
        event.listen(database.engine.sync_engine, "before_cursor_execute", count)
        await calibration.flush()  # a row: read, then update
        event.remove(database.engine.sync_engine, "before_cursor_execute", count)
        assert statements == ["SELECT", "UPDATE"]
        expected = Calibration()
        for sample in samples:
            expected = folded(expected, sample)
        stored = await calibration.stored("claude")
        assert stored.samples == len(samples)
        assert stored.ratio == pytest.approx(expected.ratio)
    finally:
        await calibration.close()
        await database.dispose()
