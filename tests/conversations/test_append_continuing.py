"""append_continuing: one guarded UPDATE when nothing changed, append()'s result either way."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.conversations.service import HeadMoved, conversation_service
from app.conversations.stamp import Stamp
from app.core.database import Database, create_database
from app.db.models import Conversation, new_id
from tests.support.conversations import MODEL, TENANT, TURN, append, message


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = create_database(database_url, pool_size=4)
    yield database
    await database.dispose()


async def _stored(
    db: Database, conversation_id: str
) -> tuple[Conversation, list[tuple[int, int, str]]]:
    async with db.reading() as session:
        conversation = await conversation_service.get(session, TENANT, conversation_id)
        rows = await conversation_service.messages(session, conversation)
    return conversation, [(m.sequence_number or 0, m.turn_number or 0, m.role) for m in rows]


async def _continue(db: Database, known: Conversation, text: str) -> None:
    async with db.writing() as session:
        await conversation_service.append_continuing(
            session,
            TENANT,
            known,
            [message("user", text), message("assistant", f"Echo: {text}")],
            Stamp(MODEL, prompt_tokens=42),
        )


async def test_continuing_matches_append(db: Database) -> None:
    fast, slow = new_id("conv"), new_id("conv")
    for conversation_id in (fast, slow):
        await append(db, conversation_id, TURN)
    known, _ = await _stored(db, fast)
    await _continue(db, known, "again")
    await append(db, slow, [message("user", "again"), message("assistant", "Echo: again")])
    (a, rows_a), (b, rows_b) = await _stored(db, fast), await _stored(db, slow)
    assert (
        rows_a
        == rows_b
        == [
            (0, 0, "system"),
            (1, 1, "user"),
            (2, 1, "assistant"),
            (3, 2, "user"),
            (4, 2, "assistant"),
        ]
    )
    for name in (
        "message_count",
        "total_tokens",
        "turn_count",
        "system_prompt_count",
        "system_prompt_tokens",
        "last_user_sequence",
        "last_user_start_tokens",
        "head_hash",
    ):
        assert getattr(a, name) == getattr(b, name), name
    assert a.last_prompt_tokens == 42


async def test_a_turn_stored_meanwhile_falls_back_to_the_current_end(db: Database) -> None:
    conversation_id = new_id("conv")
    await append(db, conversation_id, TURN)
    known, _ = await _stored(db, conversation_id)  # read by this request ...
    await _continue(db, known, "first")  # ... while a concurrent request stored its turn
    await _continue(db, known, "second")  # stale counters: must append after "first"
    conversation, rows = await _stored(db, conversation_id)
    assert [r[0] for r in rows] == list(range(7))  # no gap, no duplicate sequence number
    assert [r[1] for r in rows] == [0, 1, 1, 2, 2, 3, 3]
    assert conversation.message_count == 7
    assert conversation.turn_count == 3


async def _continue_at(db: Database, known: Conversation, text: str) -> str:
    async with db.writing() as session:
        return await conversation_service.append_continuing(
            session,
            TENANT,
            known,
            [message("user", text), message("assistant", f"Echo: {text}")],
            Stamp(MODEL),
            at=known.message_count,
        )


async def test_a_turn_that_must_continue_an_end_taken_meanwhile_goes_on_a_branch(
    db: Database,
) -> None:
    """Responses' previous_response_id: two turns read the same end; the first stored goes on
    the conversation, the second on a branch holding that end and nothing after it."""
    conversation_id = new_id("conv")
    await append(db, conversation_id, TURN)
    known, _ = await _stored(db, conversation_id)
    assert await _continue_at(db, known, "first") == conversation_id
    branch = await _continue_at(db, known, "second")
    assert branch != conversation_id
    (original, rows), (forked, branch_rows) = (
        await _stored(db, conversation_id),
        await _stored(db, branch),
    )
    assert original.message_count == forked.message_count == 5
    assert [r[2] for r in rows] == [r[2] for r in branch_rows]
    async with db.reading() as session:
        texts = [m.content for m in await conversation_service.messages(session, forked)]
    assert texts == ["be brief", "hello", "Echo: hello", "second", "Echo: second"]
    assert forked.turn_count == original.turn_count == 2


async def test_resolving_an_end_that_moved_says_so(db: Database) -> None:
    conversation_id = new_id("conv")
    await append(db, conversation_id, TURN)
    await append(db, conversation_id, [message("user", "more"), message("assistant", "ok")])
    async with db.reading() as session:
        with pytest.raises(HeadMoved) as moved:
            await conversation_service.resolve(session, TENANT, [], [], conversation_id, at=3)
        assert (moved.value.conversation_id, moved.value.at) == (conversation_id, 3)
        resolved = await conversation_service.resolve(
            session, TENANT, [], [], conversation_id, at=5
        )
    assert (resolved.conversation_id, resolved.at) == (conversation_id, 5)
