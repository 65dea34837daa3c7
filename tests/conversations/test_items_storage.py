"""The Conversations API's storage on real SQLite and PostgreSQL: items added once, a Response's
output ids recorded (twice is harmless), references resolved per tenant, a deleted item kept
but out of the history a turn loads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.context.budget import TokenBudget
from app.context.history import WindowSpec, load_history_window, measure_turn
from app.conversations.messages import ConversationMessage
from app.conversations.service import conversation_service
from app.core.database import Database, create_database
from app.core.errors import BadRequest, NotFound
from app.responses.conversations.items_service import items_service
from app.responses.references import (
    record_output_items,
    resolve_references,
    resolve_request,
)
from app.responses.schemas import ItemReference, MessageItem, ResponsesRequest
from app.tokens.counter import TokenCounter
from tests.support.conversations import OTHER, TENANT

MODEL = "gpt-4o-mini"


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    database = create_database(database_url, pool_size=4)
    yield database
    await database.dispose()


def item(role: str, text: str) -> MessageItem:
    return MessageItem.model_validate({"type": "message", "role": role, "content": text})


async def test_items_are_stored_once_and_deleted_ones_are_kept_out_of_the_history(
    db: Database,
) -> None:
    tokens = TokenCounter()
    async with db.writing() as session:
        conversation = await items_service.create(
            session, tokens, TENANT, items=[item("user", "hi")], metadata={"k": "v"}, model=MODEL
        )
        conversation_id = conversation.id
    async with db.writing() as session:
        added = await items_service.add(
            session, tokens, TENANT, conversation_id,
            [item("assistant", "hello"), item("user", "bye")], MODEL,
        )  # fmt: skip
        assert [i.item["role"] for i in added] == ["assistant", "user"]
    async with db.writing() as session:  # the newest ones again: nothing stored twice
        again = await items_service.add(
            session, tokens, TENANT, conversation_id, [item("user", "bye")], MODEL
        )
        assert [i.item["id"] for i in again] == [added[1].item["id"]]
    async with db.writing() as session:
        await items_service.delete(session, TENANT, conversation_id, added[0].item["id"])
    async with db.reading() as session:
        conversation = await conversation_service.get(session, TENANT, conversation_id)
        assert conversation.message_count == 3
        assert conversation.meta == {"k": "v"}
        listed = await items_service.items(session, TENANT, conversation)
        assert [i.item["content"][0]["text"] for i in listed] == ["hi", "bye"]
        resolved = await conversation_service.resolve(session, TENANT, [], [], conversation_id)
        new = [ConversationMessage(role="user", content="next", token_count=3)]
        shape = measure_turn(resolved, new)
        budget = TokenBudget(10_000, system=shape.system_tokens, current=shape.current_tokens)
        window = await load_history_window(
            session, resolved, new, WindowSpec(shape=shape, budget=budget, chunk_tokens=16)
        )
        sent = [m.content for m in window.system + window.history + window.current]
        assert sent == ["hi", "bye", "next"]
        stored = await conversation_service.messages(session, conversation)
        assert [(m.content, m.status) for m in stored] == [
            ("hi", "complete"), ("hello", "deleted"), ("bye", "complete"),
        ]  # fmt: skip


async def test_output_ids_resolve_for_their_tenant_only(db: Database) -> None:
    tokens = TokenCounter()
    async with db.writing() as session:
        conversation = await items_service.create(
            session, tokens, TENANT, model=MODEL, metadata=None,
            items=[item("user", "q"), item("assistant", "a")],
        )  # fmt: skip
        conversation_id = conversation.id
    output: list[dict[str, Any]] = [
        {"id": "msg_out1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "a", "annotations": []}]},
    ]  # fmt: skip
    for _ in range(2):  # recording the same ids twice never fails a turn
        async with db.writing() as session:
            await record_output_items(
                session, tenant_id=TENANT, response_id="resp_1",
                conversation_id=conversation_id, sequence_number=1, output=output,
            )  # fmt: skip
    async with db.reading() as session:
        listed = await items_service.items(
            session, TENANT, await conversation_service.get(session, TENANT, conversation_id)
        )
        assert [i.item["id"] for i in listed][1] == "msg_out1"
        derived = listed[0].item["id"]
        refs = [ItemReference(type="item_reference", id=derived), item("user", "next")]
        resolved = await resolve_references(session, TENANT, refs)
        assert resolved[0].content[0].text == "q"
        with pytest.raises(NotFound):
            await resolve_references(session, OTHER, refs)


async def test_conversation_with_store_false_where_it_is_passed_through(db: Database) -> None:
    async with db.writing() as session:
        conversation = await items_service.create(
            session, TokenCounter(), TENANT, items=[], metadata=None, model=MODEL
        )
    body = ResponsesRequest(model=MODEL, input="x", conversation=conversation.id, store=False)
    with pytest.raises(BadRequest) as refused:  # ignoring it would lose the history silently
        await resolve_request(db, TENANT, body, store_false_strict=True)
    assert refused.value.param == "store"
    await resolve_request(db, TENANT, body, store_false_strict=False)
    assert body.conversation_id == conversation.id
    foreign = ResponsesRequest(model=MODEL, input="x", conversation={"id": conversation.id})
    with pytest.raises(NotFound):
        await resolve_request(db, OTHER, foreign, store_false_strict=False)
