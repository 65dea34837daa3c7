"""The real PostgreSQL and Redis servers the suite starts (tests/plugins/real_servers.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.servers import (
    PostgresServer,
    RedisServer,
    ServerStartError,
    find_redis_server,
)

# Until tests/conftest.py registers the plugin (its intended home), register it here.
pytest_plugins = ["tests.plugins.real_servers"]

# --------------------------------------------------------------------------- PostgreSQL


@pytest.mark.postgres
async def test_postgres_select_one(postgres_database_url: str) -> None:
    url = make_url(postgres_database_url)
    assert url.drivername == "postgresql+asyncpg"
    engine = create_async_engine(postgres_database_url)
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
            database = (await conn.execute(text("SELECT current_database()"))).scalar_one()
            assert database == url.database
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_postgres_create_insert_select(postgres_database_url: str) -> None:
    engine = create_async_engine(postgres_database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)")
            )
            await conn.execute(
                text("INSERT INTO notes (body) VALUES (:body)"),
                [{"body": "first"}, {"body": "second"}],
            )
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT id, body FROM notes ORDER BY id"))).all()
        assert [tuple(row) for row in rows] == [(1, "first"), (2, "second")]
    finally:
        await engine.dispose()


_seen_databases: list[str] = []


@pytest.mark.postgres
@pytest.mark.parametrize("turn", [1, 2])
async def test_postgres_database_per_test(
    postgres_database_url: str, postgres_server: object, turn: int
) -> None:
    """Whichever order these run in, each gets a new empty database; earlier ones are gone."""
    name = make_url(postgres_database_url).database
    assert name is not None
    assert name not in _seen_databases
    engine = create_async_engine(postgres_database_url)
    try:
        async with engine.begin() as conn:
            leftover = await conn.execute(text("SELECT to_regclass('public.leftover')"))
            assert leftover.scalar_one() is None
            await conn.execute(text("CREATE TABLE leftover (turn int)"))
            await conn.execute(text("INSERT INTO leftover VALUES (:turn)"), {"turn": turn})
            existing = {
                row[0] for row in await conn.execute(text("SELECT datname FROM pg_database"))
            }
    finally:
        await engine.dispose()
    assert name in existing
    assert not existing.intersection(_seen_databases), "earlier test databases were not dropped"
    _seen_databases.append(name)


@pytest.mark.postgres
async def test_postgres_drop_survives_open_connections(
    postgres_server: PostgresServer,
) -> None:
    name = f"cg_test_open_{uuid.uuid4().hex[:12]}"
    url = await asyncio.to_thread(postgres_server.create_database, name)
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
            # The connection is still checked out: WITH (FORCE) ends it.
            await asyncio.to_thread(postgres_server.drop_database, name)
            rows = await asyncio.to_thread(
                postgres_server.execute, f"SELECT 1 FROM pg_database WHERE datname = '{name}'"
            )
            assert rows == []
            await conn.invalidate()
    finally:
        await engine.dispose()
        await asyncio.to_thread(postgres_server.drop_database, name)


@pytest.mark.postgres
def test_postgres_server_settings(postgres_server: PostgresServer) -> None:
    if not isinstance(postgres_server, PostgresServer):
        pytest.skip("an external server (CONTEXTGATE_TEST_POSTGRES_URL) keeps its own settings")
    assert postgres_server.dsn == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/postgres"
    assert postgres_server.port != 5432
    rows = postgres_server.execute(
        "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit',"
        " 'full_page_writes', 'max_connections', 'listen_addresses', 'port')"
    )
    settings = {row["name"]: row["setting"] for row in rows}
    assert settings == {
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "max_connections": "200",
        "listen_addresses": "127.0.0.1",
        "port": str(postgres_server.port),
    }


def test_postgres_start_failure_reports_the_log() -> None:
    """A server that cannot start raises with its output instead of hanging or skipping."""
    # Somewhere the postgres user (whom we run as when root) can reach, unlike tmp_path.
    fake = Path(tempfile.mkdtemp(prefix="contextgate-fake-pg-", dir="/tmp"))
    os.chmod(fake, 0o755)
    scripts = {
        "initdb": 'mkdir -p "$2"',  # called as: initdb --pgdata DIR ...
        "postgres": "echo 'FATAL:  something is broken' >&2; exit 3",
    }
    for name, body in scripts.items():
        script = fake / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    server = PostgresServer(bin_dir=fake, startup_timeout=5)
    try:
        with pytest.raises(
            ServerStartError, match=r"(?s)exited with code 3.*FATAL:  something is broken"
        ):
            server.start()
    finally:
        shutil.rmtree(fake)
    assert server.directory is None
    assert not server.running


# --------------------------------------------------------------------------- Redis


@pytest.mark.redis
async def test_redis_set_get_expire(redis_url: str) -> None:
    client = aioredis.from_url(redis_url)
    try:
        assert await client.ping()
        await client.set("greeting", "hello")
        assert await client.get("greeting") == b"hello"
        assert await client.expire("greeting", 60)
        assert 0 < await client.ttl("greeting") <= 60
        await client.set("short-lived", "x", px=50)
        await asyncio.sleep(0.2)
        assert await client.get("short-lived") is None
    finally:
        await client.aclose()


@pytest.mark.redis
@pytest.mark.parametrize("turn", [1, 2])
async def test_redis_is_flushed_between_tests(redis_url: str, turn: int) -> None:
    client = aioredis.from_url(redis_url)
    try:
        assert await client.get("cg:leftover") is None
        await client.set("cg:leftover", turn)
    finally:
        await client.aclose()


@pytest.mark.redis
def test_redis_server_stops_cleanly() -> None:
    if os.environ.get("CONTEXTGATE_TEST_REDIS_URL"):
        pytest.skip("CONTEXTGATE_TEST_REDIS_URL is set: this suite starts no redis-server")
    if find_redis_server() is None:
        pytest.skip("redis-server is not installed (make test installs it with apt-get)")
    with RedisServer() as server:
        directory = server.directory
        assert directory is not None
        assert directory.is_dir()
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        assert server.running
    assert not server.running
    assert not directory.exists()


def test_redis_start_failure_reports_the_log() -> None:
    false = shutil.which("false")
    assert false is not None
    server = RedisServer(executable=false, startup_timeout=5)
    with pytest.raises(ServerStartError, match="exited with code 1"):
        server.start()
    assert server.directory is None
