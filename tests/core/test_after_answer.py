"""``after_answer``: the bookkeeping a request leaves for once its answer is on its way."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.core.tasks import Tasks, after_answer


async def test_the_work_runs_after_the_caller_goes_on_and_is_awaited_as_background() -> None:
    tasks: Tasks = set()
    ran: list[str] = []
    after_answer(tasks, lambda: ran.append("bookkeeping"))
    ran.append("response written")  # the caller goes on without yielding
    assert len(tasks) == 1  # shutdown and the tests' drains wait for it
    await asyncio.gather(*tasks)
    assert ran == ["response written", "bookkeeping"]
    await asyncio.sleep(0)
    assert not tasks


async def test_a_failure_is_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    tasks: Tasks = set()

    def broken() -> None:
        raise RuntimeError("metrics broke")

    with caplog.at_level(logging.ERROR, logger="app.core.tasks"):
        after_answer(tasks, broken)
        await asyncio.gather(*tasks)
    assert any("after-answer work failed" in r.getMessage() for r in caplog.records)
