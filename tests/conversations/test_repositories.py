"""Conversation storage on SQLite and PostgreSQL: append, hashes, range loads, tenants, races."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.context.budget import TokenBudget
from app.context.history import WindowSpec, load_history_window, measure_turn
from app.conversations.fingerprint import chain_hashes, content_hash
from app.conversations.messages import ConversationMessage
from app.conversations.repository import conversation_repository as repository
from app.conversations.service import ResolvedConversation, conversation_service
from app.core.database import Database, create_database
from app.core.errors import NotFound
from app.db.models import new_id
from tests.support.conversations import OTHER, TENANT, TURN, append, message


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = create_database(database_url, pool_size=4)
    yield database
    await database.dispose()


def raw(messages: list[ConversationMessage]) -> list[dict[str, Any]]:
    return [m.to_openai() for m in messages]


async def resolve(
    db: Database,
    incoming: list[dict[str, Any]],
    conversation_id: str | None = None,
    tenant: str = TENANT,
) -> ResolvedConversation:
    async with db.reading() as session:
        return await conversation_service.resolve(
            session, tenant, incoming, [content_hash(m) for m in incoming], conversation_id
        )


async def test_append_numbers_messages_and_keeps_running_counters(db: Database) -> None:
    conversation_id = new_id("conv")
    conversation = await append(db, conversation_id, TURN)
    assert conversation.message_count == 3
    assert conversation.system_prompt_count == 1
    assert conversation.system_prompt_tokens == TURN[0].token_count
    assert conversation.turn_count == 1
    assert conversation.last_user_sequence == 1
    assert conversation.title == "hello"
    total = sum(m.token_count for m in TURN)
    assert conversation.total_tokens == total
    assert conversation.head_hash == chain_hashes(content_hash(m) for m in raw(TURN))[-1]

    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    more = [
        message("user", "use the tool"),
        message("assistant", None, tool_calls=[call]),
        message("tool", "42", tool_call_id="call_1"),
        message("assistant", "It is 42.", reasoning_content="the tool said so"),
    ]
    await append(db, conversation_id, more)
    async with db.reading() as session:
        stored = await conversation_service.messages(
            session, await conversation_service.get(session, TENANT, conversation_id)
        )
    assert [m.sequence_number for m in stored] == list(range(7))
    positions = [m.start_tokens for m in stored]
    assert positions == [sum(m.token_count for m in stored[:i]) for i in range(7)]
    assert [m.turn_number for m in stored] == [0, 1, 1, 2, 2, 2, 2]
    assert stored[6].reasoning_content == "the tool said so"
    steps = stored[4].reasoning_steps
    assert len(steps) == 1
    assert steps[0].tool_call_id == "call_1"
    assert steps[0].tool_name == "f"
    assert steps[0].result == "42"
    assert steps[0].result_sequence_number == 5


async def test_tail_and_head_hashes(db: Database) -> None:
    conversation_id = new_id("conv")
    await append(db, conversation_id, TURN)
    hashes = [content_hash(m) for m in raw(TURN)]
    async with db.reading() as session:
        assert await repository.tail_content_hashes(session, conversation_id, 2) == hashes[1:]
        assert await repository.tail_content_hashes(session, conversation_id, 10) == hashes
        assert await repository.head_content_hashes(session, conversation_id, 1) == hashes[:1]
        assert await repository.head_content_hashes(session, conversation_id, 0) == []


async def test_context_messages_loads_the_system_prompt_and_the_tail_only(db: Database) -> None:
    conversation_id = new_id("conv")
    history = [message("system", "sys")]
    for turn in range(30):
        history += [message("user", f"question {turn}"), message("assistant", f"answer {turn}")]
    conversation = await append(db, conversation_id, history)
    async with db.reading() as session:
        rows = await repository.all_messages(session, conversation_id)
        cut = rows[50].start_tokens
        loaded = await repository.context_messages(
            session, conversation_id, system_count=1, cut=cut
        )
    assert [r.sequence_number for r in loaded] == [0, *range(50, 61)]

    # load_history_window asks for no more than the budget allows, wherever the cut falls.
    new = [message("user", "the newest question")]
    async with db.reading() as session:
        resolved = ResolvedConversation(conversation_id, conversation, conversation.message_count)
        shape = measure_turn(resolved, new)
        budget = TokenBudget(120, system=shape.system_tokens, current=shape.current_tokens)
        window = await load_history_window(
            session, resolved, new, WindowSpec(shape=shape, budget=budget, chunk_tokens=16)
        )
    assert [m.role for m in window.system] == ["system"]
    assert window.current[-1].content == "the newest question"
    assert window.current[-1].sequence_number == 61
    sent = window.system_tokens + window.current_tokens + sum(m.token_count for m in window.history)
    assert sent <= 120
    assert window.history, "some history fits in 120 tokens"
    assert window.history[-1].sequence_number == 60
    assert window.region_count == 60


async def test_another_tenant_sees_nothing(db: Database) -> None:
    conversation_id = new_id("conv")
    conversation = await append(db, conversation_id, TURN)
    async with db.reading() as session:
        assert await repository.get(session, OTHER, conversation_id) is None
        assert await repository.find_by_heads(session, OTHER, [conversation.head_hash]) == []
        assert await repository.list_recent(session, OTHER, limit=10) == []
        assert await repository.count(session, OTHER) == 0
        assert await repository.count(session, TENANT) == 1
        with pytest.raises(NotFound):
            await conversation_service.get(session, OTHER, conversation_id)
    with pytest.raises(NotFound):
        await resolve(db, [*raw(TURN), {"role": "user", "content": "x"}], conversation_id, OTHER)
    # The same messages from another tenant start that tenant's own conversation.
    other = await resolve(db, [*raw(TURN), {"role": "user", "content": "x"}], tenant=OTHER)
    assert other.is_new
    assert other.conversation_id != conversation_id


async def test_delete_removes_the_messages(db: Database) -> None:
    conversation_id = new_id("conv")
    await append(db, conversation_id, TURN)
    async with db.writing() as session:
        conversation = await conversation_service.get(session, TENANT, conversation_id)
        await repository.delete(session, conversation)
    async with db.reading() as session:
        assert await repository.get(session, TENANT, conversation_id) is None
        assert await repository.all_messages(session, conversation_id) == []


async def test_concurrent_appends_get_gapless_sequence_numbers(db: Database) -> None:
    conversation_id = new_id("conv")
    await append(db, conversation_id, [message("user", "start")])

    async def writer(name: str) -> None:
        for i in range(5):
            await append(
                db, conversation_id, [message("user", f"{name} {i}"), message("assistant", "ok")]
            )

    await asyncio.gather(writer("a"), writer("b"))
    async with db.reading() as session:
        rows = await repository.all_messages(session, conversation_id)
        conversation = await repository.get(session, TENANT, conversation_id)
    assert conversation is not None
    assert [r.sequence_number for r in rows] == list(range(21))
    assert conversation.message_count == 21
    assert [r.start_tokens for r in rows] == [
        sum(r.token_count for r in rows[:i]) for i in range(21)
    ]
    assert conversation.total_tokens == sum(r.token_count for r in rows)
    # Each writer's pair stayed together, and the chain covers every stored message in order.
    assert all(rows[i].role == "user" and rows[i + 1].role == "assistant" for i in range(1, 21, 2))
    assert conversation.head_hash == chain_hashes(r.content_hash for r in rows)[-1]


# --- identity against the database ---------------------------------------------------------------


async def test_full_history_without_id_continues_the_conversation(db: Database) -> None:
    conversation_id = new_id("conv")
    await append(db, conversation_id, TURN)
    resolved = await resolve(db, [*raw(TURN), {"role": "user", "content": "next"}])
    assert resolved.conversation_id == conversation_id
    assert resolved.new_start == 3


async def test_same_first_message_different_conversations_no_false_match(db: Database) -> None:
    first = new_id("conv")
    second = new_id("conv")
    await append(db, first, [message("user", "hi"), message("assistant", "one")])
    await append(db, second, [message("user", "hi"), message("assistant", "two")])
    incoming = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "go on"},
    ]
    resolved = await resolve(db, incoming)
    assert resolved.conversation_id == second
    # Only the first message: no stored conversation is a prefix of it -> a new one.
    assert (await resolve(db, [{"role": "user", "content": "hi"}])).is_new


async def test_ambiguous_match_starts_a_new_conversation(db: Database) -> None:
    twins = [new_id("conv"), new_id("conv")]
    for conversation_id in twins:
        await append(db, conversation_id, [message("user", "hi"), message("assistant", "same")])
    incoming = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "same"},
        {"role": "user", "content": "and?"},
    ]
    resolved = await resolve(db, incoming)
    assert resolved.is_new
    assert resolved.conversation_id not in twins
    assert resolved.new_start == 0


async def test_longest_stored_prefix_wins(db: Database) -> None:
    short, long = new_id("conv"), new_id("conv")
    await append(db, short, [message("user", "hi"), message("assistant", "a")])
    await append(
        db,
        long,
        [
            message("user", "hi"),
            message("assistant", "a"),
            message("user", "more"),
            message("assistant", "b"),
        ],
    )
    incoming = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "last"},
    ]
    resolved = await resolve(db, incoming)
    assert resolved.conversation_id == long
    assert resolved.new_start == 4


async def test_by_id_new_messages_only_and_repeated_system_prompt(db: Database) -> None:
    conversation_id = new_id("conv")
    await append(db, conversation_id, TURN)
    only_new = await resolve(db, [{"role": "user", "content": "next"}], conversation_id)
    assert only_new.new_start == 0
    with_system = await resolve(
        db,
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "next"}],
        conversation_id,
    )
    assert with_system.new_start == 1
    full = await resolve(db, [*raw(TURN), {"role": "user", "content": "next"}], conversation_id)
    assert full.new_start == 3
    with pytest.raises(NotFound):
        await resolve(db, [{"role": "user", "content": "x"}], "conv_does_not_exist")
