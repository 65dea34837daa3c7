"""SQLite transactions on lanes (app/core/sqlite_lanes.py): SQLite's own BEGIN and COMMIT,
the ORM joining the same transaction when it is used, all or nothing stored, a busy database
answered as the engine answers it, and the usual session path past the lanes' number."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import func, select

from app.conversations.repository import conversation_repository
from app.core.database import Database, create_database
from app.core.errors import DatabaseUnavailable
from app.core.sqlite_lanes import lane_of
from app.db.models import Conversation, Message
from tests.support.conversations import message_row

TENANT = "tenant-a"


@pytest.fixture
async def database(sqlite_url: str) -> AsyncIterator[Database]:
    db = create_database(sqlite_url, pool_size=2, busy_timeout_ms=300)
    try:
        yield db
    finally:
        await db.dispose()


def _message(conversation_id: str, sequence: int) -> dict[str, object]:
    return message_row(conversation_id, TENANT, sequence, start_tokens=sequence, token_count=1)


async def _write(database: Database, conversation_id: str, *, fail: bool = False) -> None:
    """The ORM (a new conversation) and the inline statements (its messages) in one
    transaction on a lane."""
    async with database.writing() as session:
        assert lane_of(session) is not None
        session.add(Conversation(id=conversation_id, tenant_id=TENANT, message_count=2))
        await session.flush()
        rows = [_message(conversation_id, 0), _message(conversation_id, 1)]
        await conversation_repository.insert_messages(session, cast(Any, rows))
        if fail:
            raise RuntimeError("after both writes")


async def _stored(database: Database, conversation_id: str) -> tuple[int, int]:
    async with database.reading() as session:
        conversations = await session.scalar(
            select(func.count()).where(Conversation.id == conversation_id)
        )
        messages = await session.scalar(
            select(func.count()).where(Message.conversation_id == conversation_id)
        )
    return int(conversations or 0), int(messages or 0)


async def test_orm_and_inline_writes_commit_together(database: Database) -> None:
    await _write(database, "conv_both")
    assert await _stored(database, "conv_both") == (1, 2)


async def test_a_failed_transaction_stores_nothing(database: Database) -> None:
    with pytest.raises(RuntimeError, match="after both writes"):
        await _write(database, "conv_failed", fail=True)
    assert await _stored(database, "conv_failed") == (0, 0)
    await _write(database, "conv_after")  # the lane is clean for the next transaction
    assert await _stored(database, "conv_after") == (1, 2)


async def test_what_a_read_loaded_stays_readable(database: Database) -> None:
    await _write(database, "conv_read")
    async with database.reading() as session:
        assert lane_of(session) is not None
        conversation = await session.get(Conversation, "conv_read")
    assert conversation is not None
    assert conversation.message_count == 2


async def test_past_the_lanes_transactions_take_the_session_path(database: Database) -> None:
    await _write(database, "conv_many")
    entered = asyncio.Event()
    release = asyncio.Event()
    on_lanes: list[bool] = []

    async def read() -> tuple[int, int]:
        async with database.reading() as session:
            on_lanes.append(lane_of(session) is not None)
            if len(on_lanes) == 3:
                entered.set()
            await release.wait()
            return await _count(session)

    tasks = [asyncio.create_task(read()) for _ in range(3)]
    await asyncio.wait_for(entered.wait(), 5)
    release.set()
    assert await asyncio.gather(*tasks) == [(1, 2)] * 3
    assert sorted(on_lanes) == [False, True, True]  # pool_size=2 lanes, then the usual path


async def _count(session: Any) -> tuple[int, int]:
    conversations = await session.scalar(select(func.count()).select_from(Conversation))
    messages = await session.scalar(select(func.count()).select_from(Message))
    return int(conversations), int(messages)


async def test_a_writer_locked_out_gets_database_unavailable(
    database: Database, sqlite_url: str
) -> None:
    other = sqlite3.connect(Path(sqlite_url.split("///", 1)[1]), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock
    try:
        with pytest.raises(DatabaseUnavailable):
            await _write(database, "conv_locked")
    finally:
        other.execute("ROLLBACK")
        other.close()
    await _write(database, "conv_locked")  # and the lane works again once it is free
    assert await _stored(database, "conv_locked") == (1, 2)
