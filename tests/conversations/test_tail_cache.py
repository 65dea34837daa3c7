"""The rows a process keeps of a short conversation (app/conversations/tail_cache.py): the
window built from them is the one the database gives, and whatever changes the stored messages
elsewhere (an item deleted, another worker's turn, a deletion racing a turn) is seen by the
next request. On real SQLite and PostgreSQL, through the app, the fake upstream as the model."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from app.conversations.messages import HISTORY_COLUMNS
from app.conversations.repository import conversation_repository
from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.conversations.tail import _window
from app.conversations.tail_cache import TailCache, tail_stamp
from app.core.database import create_database
from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.support.conversations import append, message

TENANT = "default"  # no master key: every caller is the default tenant
MODEL = "fake-model"


async def _turn(client: httpx.AsyncClient, text: str, conversation_id: str | None) -> str:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": text}]}
    if conversation_id:
        body["conversation_id"] = conversation_id
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["conversation_id"])


def _sent(fake: FakeUpstream, last: str) -> list[str]:
    """The texts of the prompt whose last message is ``last``, as the upstream got it."""
    for request in reversed(fake.requests()):
        messages = request["body"].get("messages") or []
        if messages and messages[-1].get("content") == last:
            return [str(m.get("content")) for m in messages]
    raise AssertionError(f"no prompt ending in {last!r}")


async def _item_id(client: httpx.AsyncClient, conversation_id: str, text: str) -> str:
    listed = (await client.get(f"/v1/conversations/{conversation_id}/items")).json()["data"]
    return next(
        str(item["id"]) for item in listed if item["content"] and item["content"][0]["text"] == text
    )


async def _two_turns(client: httpx.AsyncClient) -> tuple[str, Any]:
    """A conversation of two turns, and the app's state."""
    conversation_id = await _turn(client, "one", None)
    conversation_id = await _turn(client, "two", conversation_id)
    return conversation_id, client._transport.app.state.contextgate  # type: ignore[attr-defined]


@pytest.fixture
async def app_client(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> httpx.AsyncClient:
    settings = make_settings(memory_extraction_mode="off", summary_every_pairs=0, embedder="bm25")
    result: httpx.AsyncClient = await client_for(settings)
    return result


def _window_reads(client: httpx.AsyncClient) -> list[str]:
    """A list that collects the statements reading messages, from now on."""
    engine = client._transport.app.state.contextgate.database.engine.sync_engine  # type: ignore[attr-defined]
    reads: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().startswith("SELECT messages."):
            reads.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    return reads


async def test_a_continued_chat_is_built_from_the_rows_kept_and_sees_a_deleted_item(
    app_client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    conversation_id = await _turn(app_client, "one", None)
    conversation_id = await _turn(app_client, "two", conversation_id)
    reads = _window_reads(app_client)
    await _turn(app_client, "three", conversation_id)
    assert reads == []  # the window came from the rows this process stored
    assert _sent(fake_upstream, "three")[::2] == ["one", "two", "three"]

    deleted = await _item_id(app_client, conversation_id, "two")
    response = await app_client.delete(f"/v1/conversations/{conversation_id}/items/{deleted}")
    assert response.status_code == 200, response.text
    reads.clear()
    await _turn(app_client, "four", conversation_id)
    assert len(reads) == 1  # the deletion moved the conversation's stamp: read again
    sent = _sent(fake_upstream, "four")
    assert "two" not in sent
    assert sent[0] == "one"
    assert sent[-1] == "four"


async def test_another_workers_turn_is_read_back(
    app_client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    conversation_id, state = await _two_turns(app_client)
    # What another process stores: the conversation row moves, this process's rows do not.
    await append(
        state.database,
        conversation_id,
        [message("user", "elsewhere"), message("assistant", "answered elsewhere")],
        tenant=TENANT,
    )
    await _turn(app_client, "three", conversation_id)
    assert _sent(fake_upstream, "three")[-3:] == ["elsewhere", "answered elsewhere", "three"]


async def test_a_deletion_between_a_turns_read_and_its_write_is_not_lost(
    app_client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    conversation_id, state = await _two_turns(app_client)
    async with state.database.reading() as session:  # a turn reads the conversation ...
        resolved = await conversation_service.resolve(session, TENANT, [], [], conversation_id)
    deleted = await _item_id(app_client, conversation_id, "two")  # ... an item goes ...
    response = await app_client.delete(f"/v1/conversations/{conversation_id}/items/{deleted}")
    assert response.status_code == 200, response.text
    async with state.database.writing() as session:  # ... and the turn is stored after it
        await conversation_service.append_turn(
            session, TENANT, resolved, [message("user", "late")], Stamp(MODEL)
        )
    await _turn(app_client, "three", conversation_id)
    sent = _sent(fake_upstream, "three")
    assert "two" not in sent
    assert sent[-2:] == ["late", "three"]


async def test_the_window_from_every_row_is_the_one_the_database_selects(
    database_url: str,
) -> None:
    """``_window`` over all of a conversation's rows against ``context_statement``, for every
    cut, system prompt length and recent-turns bound of a conversation with a system prompt,
    tool calls and results, list content and a deleted message's status."""
    db = create_database(database_url, pool_size=2)
    try:
        call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        parts = [{"type": "text", "text": "look"}, {"type": "text", "text": "here"}]
        history = [message("system", "be brief"), message("user", parts)]
        for turn in range(4):
            history += [
                message("assistant", None, tool_calls=[{**call, "id": f"call_{turn}"}]),
                message("tool", f"result {turn} " * 5, tool_call_id=f"call_{turn}"),
                message("assistant", f"answer {turn}"),
                message("user", f"question {turn}"),
            ]
        conversation = await append(db, "conv_window", history, tenant=TENANT)
        async with db.reading() as session:
            rows = await conversation_repository.messages_from(session, conversation.id, 0)
            total = conversation.total_tokens
            for system_count, cut, min_turn, first in itertools.product(
                (0, 1), range(0, total + 2, max(1, total // 9)), (None, 1, 3, 6), (0, 1, 7)
            ):
                expected = await conversation_repository.context_messages(
                    session,
                    conversation.id,
                    system_count=system_count,
                    cut=cut,
                    min_turn=min_turn,
                    first_sequence=first,
                )
                assert _window(rows, system_count, cut, min_turn, first) == list(expected)
    finally:
        await db.dispose()


def _row(sequence: int, content: object, text: str = "x") -> dict[str, Any]:
    values: dict[str, Any] = dict.fromkeys(HISTORY_COLUMNS)
    values.update(
        role="user",
        content=content,
        sequence_number=sequence,
        turn_number=sequence,
        token_count=1,
        start_tokens=sequence,
        status="complete",
        content_hash=text,
    )
    return values


def test_kept_rows_are_fresh_each_time_and_follow_the_stamp() -> None:
    cache = TailCache()
    before = tail_stamp(1, "h1", None)
    first = _row(0, [{"type": "text", "text": "a"}])
    cache.put("t", "c", before, [tuple(first[name] for name in HISTORY_COLUMNS)])
    rows = cache.rows("t", "c", before)
    rows[0][1].append({"type": "text", "text": "changed by a request"})  # type: ignore[union-attr]
    assert cache.rows("t", "c", before)[0][1] == [{"type": "text", "text": "a"}]
    assert cache.rows("t", "c", tail_stamp(1, "h1", None)) != []
    assert cache.rows("t", "c", tail_stamp(1, "h2", None)) == []  # another head
    assert cache.rows("other tenant", "c", before) == []

    after = tail_stamp(2, "h2", None)
    cache.appended("t", "c", before=before, after=after, rows=[_row(1, "b")])  # type: ignore[list-item]
    assert [row[1] for row in cache.rows("t", "c", after)] == [[{"type": "text", "text": "a"}], "b"]
    assert cache.rows("t", "c", before) == []
    # An append after a sequence this process does not hold: nothing kept.
    cache.appended("t", "c", before=before, after=tail_stamp(3, "h3", None), rows=[])
    assert cache.rows("t", "c", after) == []


def test_kept_rows_stay_within_their_byte_budget() -> None:
    cache = TailCache(total_bytes=11_000)
    for index in range(10):
        row = _row(0, "y" * 3_000)
        cache.put("t", f"c{index}", tail_stamp(1, "h", None), [tuple(row.values())])
    kept = [index for index in range(10) if cache.rows("t", f"c{index}", tail_stamp(1, "h", None))]
    assert kept == [7, 8, 9]  # the least recently used went first
