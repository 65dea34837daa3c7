"""schemathesis against a running ``contextgate serve`` (its /openapi.json over HTTP), bounded:
EXAMPLES generated requests per operation, valid and invalid, with the master key, and a
wall-clock budget for the whole run (BUDGET_S): past it no operation gets another generated
request, only those not yet exercised get their first. Zero server errors (5xx), every answer's
status declared for its operation in the schema, and every operation covered."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MASTER = "sk-master-schemathesis-server-0123"
EXAMPLES = 10
# The whole run's wall-clock budget: 8 s here for 25 operations and 214 requests.
BUDGET_S = 60.0
# Past the budget, each operation not yet exercised still gets one request (timeout 30 s),
# and the server answers those in milliseconds: the run ends well within this of the budget.
OVERRUN_S = 30.0


class _OutOfTime(Exception):
    """Raised from a case once the budget is spent: hypothesis stops generating (no shrink
    phase, so nothing is replayed at length), and the run goes on to the next operation."""


@dataclass
class _Run:
    statuses: Counter[int] = field(default_factory=Counter)
    covered: Counter[str] = field(default_factory=Counter)  # requests per operation
    failures: list[str] = field(default_factory=list)
    cut_short: list[str] = field(default_factory=list)  # operations the budget stopped
    operations: int = 0
    elapsed: float = 0.0


def _declared(operation: Any, status: int) -> bool:
    responses = operation.definition.raw.get("responses", {})
    return str(status) in responses or f"{str(status)[0]}XX" in responses or "default" in responses


def _fuzz(server: ContextgateServer, budget_s: float) -> _Run:
    started = time.monotonic()
    deadline = started + budget_s
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    run = _Run(operations=len(operations))
    for operation in operations:
        current = operation

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
        )
        def one(case: Any) -> None:
            label = current.label  # noqa: B023 (one() runs now)
            if time.monotonic() > deadline and run.covered[label]:
                raise _OutOfTime
            response = case.call(
                base_url=server.url, headers={"Authorization": f"Bearer {MASTER}"}, timeout=30
            )
            run.covered[label] += 1
            run.statuses[response.status_code] += 1
            problem = None
            if response.status_code >= 500:
                problem = "server error"
            elif not _declared(current, response.status_code):  # noqa: B023
                problem = "status not declared"
            if problem:
                run.failures.append(
                    f"{problem}: {case.method} {case.formatted_path} -> {response.status_code}: "
                    f"{response.text[:300]}"
                )

        try:
            one()
        except _OutOfTime:
            run.cut_short.append(operation.label)
    run.elapsed = time.monotonic() - started
    return run


def _start(start_proxy: Callable[..., ContextgateServer]) -> ContextgateServer:
    return start_proxy({"CONTEXTGATE_MASTER_KEY": MASTER, "CONTEXTGATE_REQUEST_TIMEOUT_S": "10"})


def test_fuzz_a_running_server_no_server_errors(
    start_proxy: Callable[..., ContextgateServer],
) -> None:
    run = _fuzz(_start(start_proxy), BUDGET_S)
    total = sum(run.statuses.values())
    print(
        f"schemathesis: {run.operations} operations, {total} requests in {run.elapsed:.1f} s "
        f"(budget {BUDGET_S:.0f} s, {len(run.cut_short)} cut short), {dict(run.statuses)}"
    )
    assert run.operations >= 10
    assert not run.failures, "\n".join(run.failures[:10])
    assert len(run.covered) == run.operations, "every operation gets at least one request"
    assert run.elapsed < BUDGET_S + OVERRUN_S
    assert total >= 3 * run.operations
    assert any(status < 300 for status in run.statuses)
    assert any(400 <= status < 500 for status in run.statuses)


def test_the_fuzz_run_stops_generating_at_its_deadline(
    start_proxy: Callable[..., ContextgateServer],
) -> None:
    """The bound itself: with the budget spent from the start, every operation still gets its
    one request, and no more (hypothesis stops at the second; an operation without parameters
    has only one case to give anyway)."""
    run = _fuzz(_start(start_proxy), 0.0)
    assert run.operations >= 10
    assert dict(run.covered) == dict.fromkeys(run.covered, 1)
    assert len(run.covered) == run.operations
    assert run.cut_short
    assert not run.failures, "\n".join(run.failures[:10])
    assert run.elapsed < OVERRUN_S
