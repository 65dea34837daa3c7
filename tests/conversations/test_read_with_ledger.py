"""The conversation row, its active summaries and the prompt owner's ledger come back in one
statement (issue 26: a continued request issues 6), whatever the number of summaries, and
each caller reads only its own."""

from __future__ import annotations

import orjson
from sqlalchemy import event

from app.conversations.fingerprint import chain_hashes
from app.conversations.repository import conversation_repository
from app.conversations.service import conversation_service
from app.core.database import create_database
from app.db.models import Conversation, ConversationSummaryRow, PromptLedgerRow
from app.turns.ledger_repository import complete_ledger


def _summary(
    conversation_id: str, first: int, merged_into: str | None = None
) -> ConversationSummaryRow:
    return ConversationSummaryRow(
        conversation_id=conversation_id,
        tenant_id="t1",
        first_turn=first,
        last_turn=first + 1,
        episodic=f"turns {first}-{first + 1}",
        facts=[],
        merged_into=merged_into,
    )


def _ledger(conversation_id: str) -> PromptLedgerRow:
    messages = [{"role": "user", "content": "hello " * 1000}]
    return PromptLedgerRow(
        conversation_id=conversation_id,
        tenant_id="t1",
        epoch=3,
        answer_sequence=7,
        messages=orjson.dumps(messages),
        artifacts=orjson.dumps([]),
    )


async def test_summaries_and_ledger_in_one_statement(database_url: str) -> None:
    database = create_database(database_url)
    try:
        async with database.writing() as session:
            session.add_all(
                [
                    Conversation(id="conv_a", tenant_id="t1"),
                    Conversation(id="conv_b", tenant_id="t1"),
                    Conversation(id="conv_c", tenant_id="t1"),
                ]
            )
            await session.flush()
            session.add_all(
                [
                    _summary("conv_a", 4),
                    _summary("conv_a", 0),
                    _summary("conv_a", 8),
                    _summary("conv_a", 2, merged_into="sum_x"),  # merged: not active
                    _ledger("conv_a"),
                    _ledger("conv_b"),
                ]
            )
        statements: list[str] = []

        def count(*_args: object) -> None:
            statements.append("statement")

        event.listen(database.engine.sync_engine, "before_cursor_execute", count)
        async with database.reading() as session:
            a = await conversation_repository.get_with_summaries(session, "t1", "conv_a")
            b = await conversation_repository.get_with_summaries(session, "t1", "conv_b")
            c = await conversation_repository.get_with_summaries(session, "t1", "conv_c")
            other = await conversation_repository.get_with_summaries(session, "t2", "conv_a")
        event.remove(database.engine.sync_engine, "before_cursor_execute", count)
        assert len(statements) == 4  # one each

        conversation, summaries, row = a
        assert conversation is not None
        assert conversation.id == "conv_a"
        assert [s.first_turn for s in summaries] == [0, 4, 8]  # active only, in order
        async with database.reading() as session:
            ledger = await complete_ledger(session, row)
        assert ledger is not None
        assert (ledger.epoch, ledger.answer_sequence) == (3, 7)
        assert ledger.messages[0]["content"].startswith("hello ")

        conversation, summaries, row = b  # a ledger, no summary
        assert summaries == []
        assert row is not None
        assert row.conversation_id == "conv_b"
        conversation, summaries, row = c  # a summary-less, ledger-less conversation
        assert conversation is not None
        assert summaries == []
        assert row is None
        assert other == (None, [], None)  # another tenant sees nothing of it
    finally:
        await database.dispose()


async def test_matching_by_prefix_reads_each_candidate_with_its_ledger(database_url: str) -> None:
    """A request without an id (an agent resending its history) finds its conversation by the
    heads of its prefixes, and the ledger comes with it: one statement, not two."""
    database = create_database(database_url)
    try:
        async with database.writing() as session:
            session.add_all(
                [
                    Conversation(id="conv_a", tenant_id="t1", head_hash="ha"),
                    Conversation(id="conv_b", tenant_id="t1", head_hash="hb"),
                    Conversation(id="conv_c", tenant_id="t2", head_hash="hc"),
                ]
            )
            await session.flush()
            session.add(_ledger("conv_a"))
        statements: list[str] = []

        def count(*_args: object) -> None:
            statements.append("statement")

        event.listen(database.engine.sync_engine, "before_cursor_execute", count)
        async with database.reading() as session:
            found = await conversation_repository.find_by_heads(
                session, "t1", ["h0", "ha", "hb", "hc"]
            )
        event.remove(database.engine.sync_engine, "before_cursor_execute", count)
        assert len(statements) == 1
        by_id = {conversation.id: row for conversation, row in found}
        assert set(by_id) == {"conv_a", "conv_b"}  # conv_c is another tenant's
        async with database.reading() as session:
            ledger = await complete_ledger(session, by_id["conv_a"])
        assert ledger is not None
        assert ledger.epoch == 3
        assert by_id["conv_b"] is None
    finally:
        await database.dispose()


async def test_the_longest_stored_prefix_wins_wherever_it_ends(database_url: str) -> None:
    """The last heads are looked up first (an agent's stored conversation ends a few messages
    short of what it resends), the earlier ones only without a match there: the longest
    stored prefix is found wherever it ends, and two of the same length are ambiguous."""
    hashes = [f"m{index}" for index in range(20)]
    chain = chain_hashes(hashes)
    incoming = [{"role": "user", "content": text} for text in hashes]
    database = create_database(database_url)

    def conversation(conversation_id: str, count: int, tenant: str = "t1") -> Conversation:
        return Conversation(
            id=conversation_id, tenant_id=tenant, head_hash=chain[count - 1], message_count=count
        )

    async def resolve() -> tuple[str | None, int]:
        statements.clear()
        async with database.reading() as session:
            found = await conversation_service.resolve(session, "t1", incoming, hashes, None)
        return (found.conversation.id if found.conversation else None), len(statements)

    statements: list[str] = []
    try:
        async with database.writing() as session:
            session.add_all([conversation("early", 3), conversation("theirs", 18, tenant="t2")])
        event.listen(
            database.engine.sync_engine, "before_cursor_execute", lambda *_: statements.append("")
        )
        assert await resolve() == ("early", 2)  # found among the earlier heads
        async with database.writing() as session:
            session.add(conversation("late", 17))
        assert await resolve() == ("late", 1)  # the longer one, in one statement
        async with database.writing() as session:
            session.add(conversation("late_twin", 17))
        assert await resolve() == (None, 1)  # ambiguous: a new conversation
    finally:
        await database.dispose()
