"""schemathesis against the app's own OpenAPI schema, in-process (ASGI): zero server errors.

Every operation gets a bounded number of generated requests (valid and invalid), with the
master key, so that admin-only routes are exercised too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.python import asgi

from app.cli import run_migrations
from app.core.settings import Settings
from app.main import create_app
from tests.fake_upstream import FakeUpstream

MASTER = "sk-master-schemathesis-0123456789"
EXAMPLES = 12


@pytest.fixture(scope="module")
def api_schema(
    fake_upstream_server: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    path: Path = tmp_path_factory.mktemp("schemathesis") / "contextgate.db"
    url = f"sqlite+aiosqlite:///{path}"
    run_migrations(url)
    app = create_app(
        Settings(
            database_url=url,
            upstream_base_url=fake_upstream_server.base_url,
            master_key=MASTER,
            max_retries=0,
            request_timeout_s=10,
            _env_file=None,  # type: ignore[call-arg]
        )
    )
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    asgi.shutdown_lifespans()  # the app's lifespan ran in schemathesis' event-loop thread


def test_no_server_errors(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10
    failures: list[str] = []
    statuses: list[int] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case: Any) -> None:
            response = case.call(headers={"Authorization": f"Bearer {MASTER}"})
            statuses.append(response.status_code)
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.formatted_path} -> {response.status_code}: "
                    f"{response.text[:300]}"
                )

        run()
    assert not failures, "\n".join(failures[:10])
    assert len(statuses) >= 3 * len(operations)
    assert any(status < 300 for status in statuses)
    assert any(400 <= status < 500 for status in statuses)
