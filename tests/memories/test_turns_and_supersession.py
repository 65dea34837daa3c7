"""Turn assignment and memory supersession on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.compaction.repository import summary_repository
from app.conversations.messages import ConversationMessage
from app.conversations.repository import conversation_repository
from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.core.database import Database, create_database
from app.memories.repository import memory_repository
from app.memories.service import NewMemory, memory_service


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = create_database(database_url)
    yield database
    await database.dispose()


def msg(role: str, content: str | None = None, **extra: object) -> ConversationMessage:
    return ConversationMessage(role=role, content=content, token_count=5, **extra)


def call(call_id: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


async def test_a_user_message_starts_a_turn_and_late_tool_results_keep_their_call_turn(
    db: Database,
) -> None:
    batches = [
        [msg("system", "S"), msg("user", "q1"), msg("assistant", tool_calls=[call("c1")])],
        [msg("tool", "r1", tool_call_id="c1"), msg("assistant", "a1")],
        [msg("user", "q2"), msg("assistant", tool_calls=[call("c2"), call("c3")])],
        [msg("tool", "r2", tool_call_id="c2"), msg("user", "q3")],
        [msg("tool", "r3 late", tool_call_id="c3"), msg("assistant", "a3")],
    ]
    for batch in batches:
        async with db.writing() as session:
            await conversation_service.append(session, "t1", "conv_turns", batch, Stamp("m"))
    async with db.reading() as session:
        rows = await conversation_repository.all_messages(session, "conv_turns")
        conversation = await summary_repository.conversation(session, "t1", "conv_turns")
    assert [(r.role, r.turn_number) for r in rows] == [
        ("system", 0),
        ("user", 1),
        ("assistant", 1),
        ("tool", 1),
        ("assistant", 1),
        ("user", 2),
        ("assistant", 2),
        ("tool", 2),
        ("user", 3),
        ("tool", 2),  # arrived after turn 3 started: still the turn of its call
        ("assistant", 3),
    ]
    assert conversation is not None
    assert conversation.turn_count == 3


async def test_restated_memory_updates_and_contradiction_supersedes(db: Database) -> None:
    async with db.writing() as session:
        first, created = await memory_service.add(
            session, "t1", "u", NewMemory("User lives in Paris", "fact", 5), dedupe_threshold=0.85
        )
        assert created
        again, created = await memory_service.add(
            session, "t1", "u", NewMemory("user lives in Paris!", "fact", 8), dedupe_threshold=0.85
        )
        assert not created
        assert again.id == first.id
        assert again.importance == 8
        newer, created = await memory_service.add(
            session,
            "t1",
            "u",
            NewMemory("User moved to Berlin", "fact", 7, supersedes=(first.id,)),
            dedupe_threshold=0.85,
        )
        assert created
        # Another tenant's same user is a different person.
        await memory_service.add(
            session, "t2", "u", NewMemory("User lives in Paris", "fact"), dedupe_threshold=0.85
        )
    async with db.reading() as session:
        active = await memory_repository.memories(session, "t1", "u")
        every = await memory_repository.memories(session, "t1", "u", active_only=False)
        other = await memory_repository.memories(session, "t2", "u")
    assert [m.content for m in active] == ["User moved to Berlin"]
    assert {m.id: m.superseded_by for m in every} == {first.id: newer.id, newer.id: None}
    assert len(other) == 1
