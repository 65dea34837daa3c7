"""The provider's tokens: per model, the ratio between what the upstream reports and our count.

Budgets are in the provider's tokens (a 200k Claude window is 200k of Anthropic's tokens), but
contextgate counts with tiktoken, which runs 20-35% below Claude's tokenizer. Every response's
usage is a sample: reported prompt tokens / our count of the same prompt. The running estimate
lives in the database (``token_calibration``), so workers and replicas share it; each process
keeps a copy for ``refresh_s`` seconds, folds its own samples into that copy at once, and writes
them to the database in the background at most every ``flush_s`` seconds (a request never
waits for it, and costs no SQL statement of its own). Every budget decision divides the
provider's budget by the ratio (``own_budget``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.database import Database
from app.db.models import TokenCalibrationRow
from app.db.upsert import dialect_insert

__all__ = ["Calibration", "TokenCalibration"]

logger = logging.getLogger(__name__)

MIN_SAMPLE_TOKENS = 1000  # below this, fixed provider overheads dominate the ratio
RATIO_RANGE = (0.5, 3.0)  # a sample outside it is a miscount, not a tokenizer
WARMUP_SAMPLES = 5  # the first samples are averaged; then an exponential moving average
ALPHA = 0.2


@dataclass(frozen=True, slots=True)
class Calibration:
    ratio: float = 1.0
    samples: int = 0

    def own_budget(self, provider_tokens: int) -> int:
        """A budget in the provider's tokens, in contextgate's own count."""
        return max(1, int(provider_tokens / self.ratio))


def sample_ratio(own_tokens: int, reported_tokens: int | None) -> float | None:
    """One response's ratio, or None when it says nothing reliable."""
    if not reported_tokens or own_tokens < MIN_SAMPLE_TOKENS:
        return None
    ratio = reported_tokens / own_tokens
    low, high = RATIO_RANGE
    return ratio if low <= ratio <= high else None


def folded(current: Calibration, sample: float) -> Calibration:
    """The estimate after one more sample (what ``flush`` and ``record`` store too)."""
    alpha = 1 / (current.samples + 1) if current.samples < WARMUP_SAMPLES else ALPHA
    return Calibration(current.ratio + (sample - current.ratio) * alpha, current.samples + 1)


class TokenCalibration:
    def __init__(self, database: Database, *, refresh_s: float = 5.0, flush_s: float = 2.0) -> None:
        self.database = database
        self.refresh_s = refresh_s
        self.flush_s = flush_s
        self._known: dict[str, tuple[float, Calibration]] = {}
        self._pending: dict[str, list[float]] = {}
        self._flushing: asyncio.Task[None] | None = None

    def observe(self, model: str, sample: float) -> None:
        """One response's sample: this process uses it at once; the database gets it soon."""
        known = self._known.get(model)
        if known is not None:
            self._known[model] = (known[0], folded(known[1], sample))
        self._pending.setdefault(model, []).append(sample)
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.flush_s)
        await self.flush()

    async def flush(self) -> None:
        """Write the samples observed so far (one transaction); a failure keeps nothing back
        from requests, it only loses those samples."""
        pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            async with self.database.writing() as session:
                for model, samples in pending.items():
                    await self._fold(session, model, samples)
        except Exception:
            logger.warning("token calibration could not be stored", exc_info=True)

    async def close(self) -> None:
        """Write what is pending (the waiting flush is cancelled, a running one finishes)."""
        task = self._flushing
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()

    async def get(self, model: str) -> Calibration:
        """The model's ratio, read from the database at most every ``refresh_s`` seconds."""
        now = time.monotonic()
        known = self._known.get(model)
        if known is not None and now - known[0] < self.refresh_s:
            return known[1]
        try:
            async with self.database.reading() as session:
                row = await session.get(TokenCalibrationRow, model)
        except Exception:  # the ratio only sharpens budgets: never fail a request for it
            logger.warning("token calibration could not be read", exc_info=True)
            return known[1] if known else Calibration()
        value = Calibration(row.ratio, row.samples) if row is not None else Calibration()
        self._known[model] = (now, value)
        return value

    async def record(self, session: AsyncSession, model: str, sample: float) -> None:
        """Fold one sample into the shared estimate now (in the caller's write transaction)."""
        await self._fold(session, model, [sample])
        known = self._known.get(model)
        if known is not None:  # this process sees its own sample at once
            self._known[model] = (known[0], folded(known[1], sample))

    async def _fold(self, session: AsyncSession, model: str, samples: list[float]) -> None:
        """Fold ``samples`` into the stored estimate: the row read (locked on PostgreSQL; a
        SQLite write transaction holds the whole database) and written once, however many
        samples a flush brings (one UPDATE per sample cost ~1 ms each)."""
        row = await session.get(TokenCalibrationRow, model, with_for_update=True)
        current = Calibration(row.ratio, row.samples) if row is not None else Calibration()
        for sample in samples:
            current = folded(current, sample)
        if row is not None:
            row.ratio, row.samples = current.ratio, current.samples
            return
        dialect = "sqlite" if self.database.is_sqlite else "postgresql"
        await session.execute(  # another process may insert the first row meanwhile
            dialect_insert(dialect, TokenCalibrationRow)
            .values(model=model, ratio=current.ratio, samples=current.samples)
            .on_conflict_do_nothing(index_elements=["model"])
        )

    async def stored(self, model: str) -> Calibration:
        """The shared estimate as stored now (for tests and the inspector)."""
        async with self.database.reading() as session:
            row = (
                await session.execute(
                    select(TokenCalibrationRow).where(TokenCalibrationRow.model == model)
                )
            ).scalar_one_or_none()
        return Calibration(row.ratio, row.samples) if row is not None else Calibration()
