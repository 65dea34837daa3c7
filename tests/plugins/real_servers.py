"""Pytest fixtures for the real PostgreSQL and Redis servers the suite starts on loopback.

Fixtures
--------
``postgres_server`` (session)
    A :class:`tests.servers.PostgresServer`: a throw-away cluster on a free port of 127.0.0.1
    (trust auth, ``fsync=off``), started the first time a test asks for it and stopped at the
    end of the session. Has ``.port``, ``.dsn``, ``create_database(name)``,
    ``drop_database(name)`` and ``execute(*sql)``.
``postgres_database_url`` (function)
    A fresh, uniquely named database for one test, as an SQLAlchemy async URL
    (``postgresql+asyncpg://postgres@127.0.0.1:PORT/<name>``); dropped afterwards with
    ``DROP DATABASE ... WITH (FORCE)``, so connections left open do not block it.
``redis_server`` (session)
    A :class:`tests.servers.RedisServer` (no persistence) on a free port of 127.0.0.1, started
    lazily like ``postgres_server``. Has ``.port``, ``.url`` and ``flush()``.
``redis_url`` (function)
    ``redis://127.0.0.1:PORT/0``; the server is emptied (FLUSHALL) after each test.

Missing binaries skip the tests that need them, with a reason saying how to install them
(``make test`` installs them with apt-get). Binaries that are present but fail to start make
those tests fail (error), never skip.

Environment
-----------
``CONTEXTGATE_TEST_POSTGRES_URL``
    Use this PostgreSQL server instead of starting one, e.g.
    ``postgresql://postgres:secret@127.0.0.1:5432/postgres``. The user must be allowed to
    ``CREATE DATABASE``; each test's database is created on it and dropped afterwards (the
    server needs PostgreSQL 13+ for ``WITH (FORCE)``). A ``+asyncpg`` scheme suffix is accepted.
``CONTEXTGATE_TEST_REDIS_URL``
    Use this Redis server instead of starting one, e.g. ``redis://127.0.0.1:6379/15``. After
    each test only that URL's database is emptied (FLUSHDB, not FLUSHALL), so point it at a
    database index nothing else uses.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.servers import (
    ExternalPostgres,
    ExternalRedis,
    PostgresServer,
    RedisServer,
    find_postgres_bin,
    find_redis_server,
)

POSTGRES_URL_ENV = "CONTEXTGATE_TEST_POSTGRES_URL"
REDIS_URL_ENV = "CONTEXTGATE_TEST_REDIS_URL"

POSTGRES_MISSING = (
    "PostgreSQL is not installed (make test installs it with apt-get; install postgresql to "
    f"run these tests, or set {POSTGRES_URL_ENV})"
)
REDIS_MISSING = (
    "redis-server is not installed (make test installs it with apt-get; install redis-server "
    f"to run these tests, or set {REDIS_URL_ENV})"
)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer | ExternalPostgres]:
    external = os.environ.get(POSTGRES_URL_ENV, "").strip()
    if external:
        yield ExternalPostgres(external)
        return
    bin_dir = find_postgres_bin()
    if bin_dir is None:
        pytest.skip(POSTGRES_MISSING)
    # A start failure raises ServerStartError (with the server's log): the tests error out.
    with PostgresServer(bin_dir=bin_dir) as server:
        yield server


@pytest.fixture
def postgres_database_url(postgres_server: PostgresServer | ExternalPostgres) -> Iterator[str]:
    name = f"cg_test_{uuid.uuid4().hex[:16]}"
    url = postgres_server.create_database(name)
    try:
        yield url
    finally:
        postgres_server.drop_database(name)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer | ExternalRedis]:
    external = os.environ.get(REDIS_URL_ENV, "").strip()
    if external:
        yield ExternalRedis(external)
        return
    executable = find_redis_server()
    if executable is None:
        pytest.skip(REDIS_MISSING)
    with RedisServer(executable=executable) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer | ExternalRedis) -> Iterator[str]:
    try:
        yield redis_server.url
    finally:
        redis_server.flush()
