"""Shared fixtures. Real servers only: SQLite files, PostgreSQL and Redis started on loopback,
the fake upstream in a subprocess, contextgate itself in-process (ASGI) or as a subprocess."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import app  # noqa: F401  (offline defaults for tiktoken and litellm before anything else)
from app.cli import run_migrations
from app.core.settings import Settings
from app.main import create_app
from tests.fake_upstream import FakeUpstream
from tests.support.proxy import ContextgateServer

pytest_plugins = ["tests.plugins.real_servers", "tests.plugins.log_capture"]


@pytest.fixture(scope="session")
def fake_upstream_server() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture
def fake_upstream(fake_upstream_server: FakeUpstream) -> FakeUpstream:
    """The session's fake upstream, emptied of recordings, scripts and faults."""
    fake_upstream_server.reset()
    return fake_upstream_server


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database: a SQLite file, and a PostgreSQL database."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'contextgate.db'}"
    else:
        url = str(request.getfixturevalue("postgres_database_url"))
    run_migrations(url)
    return url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'contextgate.db'}"
    run_migrations(url)
    return url


# `CONTEXTGATE_TEST_BACKEND=postgres` runs the in-process and end-to-end tests (make_settings,
# client, start_proxy) on the suite's PostgreSQL instead of SQLite files (`make test` does).
TEST_BACKEND = os.environ.get("CONTEXTGATE_TEST_BACKEND", "").strip().lower() or "sqlite"


@pytest.fixture
def app_database_url(request: pytest.FixtureRequest) -> str:
    """The migrated database in-process apps use: SQLite, or PostgreSQL (TEST_BACKEND)."""
    if TEST_BACKEND == "postgres":
        url = str(request.getfixturevalue("postgres_database_url"))
        run_migrations(url)
        return url
    return str(request.getfixturevalue("sqlite_url"))


@pytest.fixture
def make_settings(fake_upstream: FakeUpstream, app_database_url: str) -> Callable[..., Settings]:
    """Settings for an in-process app: a migrated database (SQLite file) and the fake upstream."""

    def build(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": app_database_url,
            "upstream_base_url": fake_upstream.base_url,
            "max_retries": 0,
            "_env_file": None,
        }
        values.update(overrides)
        return Settings(**values)

    return build


@pytest.fixture
async def client_for() -> AsyncIterator[Callable[[Settings], Any]]:
    """Start the app in-process (lifespan included) and give an httpx client on it."""
    stack: list[Any] = []

    async def open_client(settings: Settings) -> httpx.AsyncClient:
        application = create_app(settings)
        lifespan = application.router.lifespan_context(application)
        await lifespan.__aenter__()
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://contextgate"
        )
        stack.append((lifespan, client))
        return client

    yield open_client
    for lifespan, client in reversed(stack):
        await client.aclose()
        await lifespan.__aexit__(None, None, None)


@pytest.fixture
async def client(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> httpx.AsyncClient:
    """An in-process contextgate on SQLite, forwarding to the fake upstream."""
    result: httpx.AsyncClient = await client_for(make_settings())
    return result


@pytest.fixture
def start_proxy(
    tmp_path: Path, fake_upstream: FakeUpstream, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ContextgateServer]]:
    """Start ``contextgate serve`` as a subprocess; every one started is stopped afterwards.

    All the servers of one test share one database (restarts keep their data): a SQLite file,
    or a PostgreSQL database of its own when CONTEXTGATE_TEST_BACKEND=postgres.
    """
    servers: list[ContextgateServer] = []
    proxy_database: list[str] = []
    drops: list[Callable[[], None]] = []

    def database() -> str:
        if not proxy_database:
            if TEST_BACKEND == "postgres":
                pg = request.getfixturevalue("postgres_server")
                name = f"cg_proxy_{uuid.uuid4().hex[:16]}"
                proxy_database.append(pg.create_database(name))
                drops.append(lambda: pg.drop_database(name))
            else:
                proxy_database.append(f"sqlite+aiosqlite:///{tmp_path / 'proxy.db'}")
        return proxy_database[0]

    def start(env: dict[str, str] | None = None, **kwargs: Any) -> ContextgateServer:
        values = {
            "CONTEXTGATE_DATABASE_URL": database(),
            "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream.base_url,
            "CONTEXTGATE_MAX_RETRIES": "0",
        }
        values.update(env or {})
        server = ContextgateServer(
            values, log_path=tmp_path / f"proxy-{len(servers)}.log", **kwargs
        )
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()
    for drop in drops:
        drop()


def pytest_configure(config: pytest.Config) -> None:
    # Migrations run alembic's async env with asyncio.run(); keep them off the test loop.
    asyncio.get_event_loop_policy()
