"""Alembic environment (async). The URL: config attribute, else CONTEXTGATE_DATABASE_URL."""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.core.settings import load_settings
from app.core.sqlite_driver import async_creator
from app.db.models import Base

config = context.config
if config.config_file_name is not None and not config.attributes.get("database_url"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("database_url")
    return str(url) if url else load_settings().database_url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


async def run_online() -> None:
    url = _url()
    # SQLite through contextgate's inline driver, as the server opens it: no driver thread
    # left to report into a closed event loop when the database cannot be opened.
    extra = (
        {"async_creator": async_creator(url, busy_timeout_ms=30_000)}
        if url.startswith("sqlite")
        else {}
    )
    engine = create_async_engine(url, **extra)
    async with engine.connect() as connection:
        await connection.run_sync(_configure)
    await engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    asyncio.run(run_online())
