"""schemathesis against a running ``contextgate serve`` (its /openapi.json over HTTP), bounded:
EXAMPLES generated requests per operation, valid and invalid, with the master key. Zero server
errors (5xx) and every answer's status declared for its operation in the schema."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MASTER = "sk-master-schemathesis-server-0123"
EXAMPLES = 10


def _declared(operation: Any, status: int) -> bool:
    responses = operation.definition.raw.get("responses", {})
    return str(status) in responses or f"{str(status)[0]}XX" in responses or "default" in responses


def test_fuzz_a_running_server_no_server_errors(
    start_proxy: Callable[..., ContextgateServer],
) -> None:
    server = start_proxy({"CONTEXTGATE_MASTER_KEY": MASTER, "CONTEXTGATE_REQUEST_TIMEOUT_S": "10"})
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    for operation in operations:
        current = operation

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case: Any) -> None:
            response = case.call(
                base_url=server.url, headers={"Authorization": f"Bearer {MASTER}"}, timeout=30
            )
            statuses[response.status_code] += 1
            problem = None
            if response.status_code >= 500:
                problem = "server error"
            elif not _declared(current, response.status_code):  # noqa: B023 (run() runs now)
                problem = "status not declared"
            if problem:
                failures.append(
                    f"{problem}: {case.method} {case.formatted_path} -> {response.status_code}: "
                    f"{response.text[:300]}"
                )

        run()
    total = sum(statuses.values())
    print(f"schemathesis: {len(operations)} operations, {total} requests, {dict(statuses)}")
    assert not failures, "\n".join(failures[:10])
    assert total >= 3 * len(operations)
    assert any(status < 300 for status in statuses)
    assert any(400 <= status < 500 for status in statuses)
