"""Response records and conversation forks on real SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.conversations.service import conversation_service
from app.core.database import Database, create_database
from app.core.errors import NotFound
from app.db.models import new_id, utcnow
from app.responses.repository import response_repository
from app.responses.service import response_service
from tests.support.conversations import OTHER, TENANT, TURN, append, message


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = create_database(database_url, pool_size=4)
    yield database
    await database.dispose()


async def _record(db: Database, conversation_id: str, end: int) -> str:
    response_id = new_id("resp")
    async with db.writing() as session:
        await response_repository.insert(
            session,
            {
                "id": response_id,
                "tenant_id": TENANT,
                "conversation_id": conversation_id,
                "end_sequence": end,
                "model": "m",
                "status": "completed",
                "output": [{"type": "message", "id": "msg_1"}],
                "usage": None,
                "input_items": [],
                "echo": {"model": "m"},
                "incomplete_reason": None,
                "created_at": utcnow(),
            },
        )
    return response_id


async def test_continue_at_the_end_and_branch_from_earlier(db: Database) -> None:
    source = new_id("conv")
    await append(db, source, TURN)  # system, user, assistant
    first = await _record(db, source, 3)
    assert (await response_service.start_from(db, TENANT, first, store=True)).conversation_id == (
        source
    )
    thinking = [{"type": "thinking", "thinking": "t", "signature": "s"}]
    await append(
        db,
        source,
        [message("user", "more"), message("assistant", "Echo: more", thinking_blocks=thinking)],
    )
    start = await response_service.start_from(db, TENANT, first, store=True)
    fork = start.conversation_id
    assert fork is not None
    assert fork != source
    async with db.reading() as session:
        original = await conversation_service.get(session, TENANT, source)
        branch = await conversation_service.get(session, TENANT, fork)
        copied = await conversation_service.messages(session, branch)
    assert branch.message_count == 3
    assert original.message_count == 5
    assert branch.head_hash != original.head_hash
    assert [m.content for m in copied] == ["be brief", "hello", "Echo: hello"]
    assert branch.turn_count == 1
    assert branch.system_prompt_count == original.system_prompt_count == 1
    assert branch.total_tokens == sum(m.token_count for m in copied)
    # The branch continues as any conversation; the original is untouched.
    await append(db, fork, [message("user", "branch"), message("assistant", "Echo: branch")])
    async with db.reading() as session:
        assert (await conversation_service.get(session, TENANT, fork)).message_count == 5
    # store=false: the stored history up to the response, nothing created.
    history = (await response_service.start_from(db, TENANT, first, store=False)).history
    assert [m["content"] for m in history] == ["be brief", "hello", "Echo: hello"]


async def test_records_belong_to_their_tenant(db: Database) -> None:
    conversation = new_id("conv")
    await append(db, conversation, TURN)
    response_id = await _record(db, conversation, 3)
    assert (await response_service.get(db, TENANT, response_id)).end_sequence == 3
    for call in (
        response_service.get(db, OTHER, response_id),
        response_service.start_from(db, OTHER, response_id, store=True),
        response_service.delete(db, OTHER, response_id),
    ):
        with pytest.raises(NotFound):
            await call
    await response_service.delete(db, TENANT, response_id)
    with pytest.raises(NotFound):
        await response_service.get(db, TENANT, response_id)
