"""The hot path's Core statements run straight on SQLite's connection (app/db/sqlite_core.py)
and read and write exactly what SQLAlchemy's own execution does: the same rows (JSON, dates,
NULLs), the same column defaults, the same errors, every statement seen by the engine's
statement listeners. On PostgreSQL they go through SQLAlchemy, with the same results."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest
from sqlalchemy import Table, bindparam, event, insert, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Executable

from app.conversations import statements
from app.conversations.repository import conversation_repository
from app.core.database import Database, create_database
from app.db.models import (
    Conversation,
    ConversationSummaryRow,
    PromptLedgerRow,
    RequestLog,
)
from app.db.repository import execute_core
from app.db.sqlite_core import run_inline
from app.turns.repository import request_log_repository
from tests.support.conversations import message_row

TENANT = "tenant-a"
CONVERSATION = "conv_inline"
TOOL_CALLS = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
THINKING = [{"type": "thinking", "thinking": "hm", "signature": "sig=="}]
_INSERT_LOG = insert(cast(Table, RequestLog.__table__))
_STORED = (
    "SELECT sequence_number, role, content, tool_calls, thinking_blocks, status, created_at"
    " FROM messages ORDER BY sequence_number"
)
_STORED_LOGS = "SELECT id, stream, context_utilization, created_at FROM request_logs"


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = create_database(database_url)
    try:
        yield db
    finally:
        await db.dispose()


def _message(sequence: int, role: str, **columns: object) -> dict[str, object]:
    return message_row(CONVERSATION, TENANT, sequence, role, **({"content": None} | columns))


async def _seed(db: Database) -> None:
    """A conversation with two summaries and a ledger part (ORM), and messages and a request
    log written by the hot path's own statements."""
    async with db.writing() as session:
        session.add(
            Conversation(
                id=CONVERSATION,
                tenant_id=TENANT,
                model="m",
                meta={"k": "v"},
                message_count=3,
                total_tokens=30,
                turn_count=1,
                head_hash="head-3",
                last_prompt_tokens=None,
            )
        )
        await session.flush()
        for first, last in ((1, 2), (3, 4)):
            session.add(
                ConversationSummaryRow(
                    conversation_id=CONVERSATION,
                    tenant_id=TENANT,
                    first_turn=first,
                    last_turn=last,
                    episodic=f"turns {first}-{last}",
                    facts=[{"fact": "x", "type": "fact", "importance": 3}],
                    model=None,
                )
            )
        session.add(
            PromptLedgerRow(
                conversation_id=CONVERSATION,
                part=0,
                tenant_id=TENANT,
                answer_sequence=2,
                messages=b"[]",
                artifacts=b"[]",
            )
        )
        await session.flush()
        rows = [
            _message(0, "user", content="héllo"),
            _message(1, "assistant", tool_calls=TOOL_CALLS, thinking_blocks=THINKING),
            _message(2, "tool", content=[{"type": "text", "text": "out"}], tool_call_id="call_1"),
        ]
        await conversation_repository.insert_messages(session, cast(Any, rows))
        await request_log_repository.insert(
            session,
            {
                "id": "req_1",
                "tenant_id": TENANT,
                "key_id": None,
                "conversation_id": CONVERSATION,
                "model": "m",
                "status": "ok",
                "status_code": 200,
                "prompt_tokens": 5,
                "prompt_cost": 0.5,
                "total_cost": 0.5,
                "latency_ms": 1.5,
                "context_utilization": {"tokens_used": 5, "notes": ["a", "b"]},
            },
        )


async def _through_sqlalchemy(
    session: AsyncSession, statement: Executable, parameters: Mapping[str, object]
) -> list[tuple[Any, ...]]:
    result = await session.run_sync(
        lambda sync: sync.connection().execute(statement, dict(parameters))
    )
    return [tuple(row) for row in result.all()]


_READS: list[tuple[str, Executable, dict[str, object]]] = [
    (
        "conversation, summaries and ledger",
        statements.WITH_SUMMARIES,
        {"conversation_id": CONVERSATION, "tenant_id": TENANT},
    ),
    ("by one head", statements.BY_HEADS, {"tenant_id": TENANT, "heads": ["head-3"]}),
    (
        "by three heads",
        statements.BY_HEADS,
        {"tenant_id": TENANT, "heads": ["x", "head-3", "y"]},
    ),
    ("by no head", statements.BY_HEADS, {"tenant_id": TENANT, "heads": []}),
    (
        "context window",
        statements.context_statement(True),
        {
            "conversation_id": CONVERSATION,
            "system_count": 0,
            "cut": 15,
            "min_turn": 1,
            "first_sequence": 1,
        },
    ),
    (
        "messages from",
        statements.messages_from(),
        {"conversation_id": CONVERSATION, "first_sequence": 1},
    ),
    (
        "edge hashes",
        statements.EDGE_HASHES,
        {"conversation_id": CONVERSATION, "head": 1, "tail": 2},
    ),
    ("request log", select(cast(Table, RequestLog.__table__)), {}),
]


async def test_reads_return_what_sqlalchemy_returns(database: Database) -> None:
    await _seed(database)
    for name, statement, parameters in _READS:
        async with database.reading() as session:
            if not database.is_sqlite:
                await session.connection()
            inline = await run_inline(session, statement, parameters)
            expected = await _through_sqlalchemy(session, statement, parameters)
            got = (await execute_core(session, statement, parameters)).all()
        assert [tuple(row) for row in got] == expected, name
        assert (inline is not None) == database.is_sqlite, name
        if inline is not None:
            assert [tuple(row) for row in inline.all()] == expected, name
    assert expected[0][1] == TENANT  # the request log was read, with its defaults
    log = dict(zip(RequestLog.__table__.columns.keys(), expected[0], strict=True))
    assert log["created_at"] is not None
    assert log["stream"] is False
    assert log["context_utilization"] == {"tokens_used": 5, "notes": ["a", "b"]}


async def test_entities_read_as_the_orm_loads_them(database: Database) -> None:
    await _seed(database)
    async with database.reading() as session:
        conversation, summaries, ledger = await conversation_repository.get_with_summaries(
            session, TENANT, CONVERSATION
        )
        [(by_head, by_head_ledger)] = await conversation_repository.find_by_heads(
            session, TENANT, ["nope", "head-3"]
        )
    async with database.reading() as session:
        loaded = await session.get(Conversation, CONVERSATION)
        loaded_summaries = (
            await session.execute(
                select(ConversationSummaryRow).order_by(ConversationSummaryRow.first_turn)
            )
        ).scalars()
        loaded_ledger = (await session.execute(select(PromptLedgerRow))).scalar_one()
        assert conversation is not None
        assert ledger is not None
        assert by_head_ledger is not None
        assert _columns(conversation) == _columns(loaded) == _columns(by_head)
        assert [_columns(s) for s in summaries] == [_columns(s) for s in loaded_summaries]
        assert _columns(ledger) == _columns(loaded_ledger) == _columns(by_head_ledger)
    assert conversation.meta == {"k": "v"}
    assert conversation.last_prompt_tokens is None
    assert [s.first_turn for s in summaries] == [1, 3]
    assert summaries[0].facts == [{"fact": "x", "type": "fact", "importance": 3}]


def _columns(instance: object) -> dict[str, object]:
    table = cast(Table, type(instance).__table__)  # type: ignore[attr-defined]
    mapper = type(instance).__mapper__  # type: ignore[attr-defined]
    keys = [mapper.get_property_by_column(column).key for column in table.c]
    return {key: getattr(instance, key) for key in keys}


async def test_a_conflict_is_sqlalchemys_integrity_error(database: Database) -> None:
    await _seed(database)
    with pytest.raises(sa_exc.IntegrityError):
        async with database.writing() as session:
            await conversation_repository.insert_messages(
                session, cast(Any, [_message(3, "user"), _message(2, "user")])
            )
    async with database.reading() as session:  # the failed transaction left nothing
        rows = (await execute_core(session, statements.messages_from(), _from(0))).all()
    assert [row[8] for row in rows] == [0, 1, 2]


def _from(sequence: int) -> dict[str, object]:
    return {"conversation_id": CONVERSATION, "first_sequence": sequence}


async def test_a_missing_parameter_is_refused(database: Database) -> None:
    statement = select(cast(Table, Conversation.__table__)).where(
        Conversation.id == bindparam("wanted")
    )
    async with database.reading() as session:
        with pytest.raises(sa_exc.SQLAlchemyError, match="wanted"):
            await execute_core(session, statement, {})


async def test_statement_listeners_see_every_statement(database: Database) -> None:
    await _seed(database)
    seen: list[tuple[str, Sequence[object] | Mapping[str, object], bool]] = []

    def listen(_conn: Any, _cursor: Any, sql: str, params: Any, _ctx: Any, many: bool) -> None:
        seen.append((" ".join(sql.split()[:3]), params, many))

    engine = database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", listen)
    try:
        async with database.writing() as session:
            await conversation_repository.insert_messages(
                session, cast(Any, [_message(3, "user"), _message(4, "assistant")])
            )
        async with database.reading() as session:
            rows = (await execute_core(session, statements.messages_from(), _from(3))).all()
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    executed = [sql for sql, _, _ in seen]
    assert "INSERT INTO messages" in executed
    assert "SELECT messages.role, messages.content," in executed
    assert [many for sql, _, many in seen if sql == "INSERT INTO messages"] == [True]
    assert [row[0] for row in rows] == ["user", "assistant"]


_STAMPS = [
    datetime(2026, 1, 2, 3, 4, 5),  # microsecond 0
    datetime(2026, 1, 2, 3, 4, 5, 67, tzinfo=UTC),
    datetime(2026, 1, 2, 3, 4, 5, 67, tzinfo=timezone(timedelta(hours=5, minutes=30))),
]


def _written(sequence: int) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Messages taking ``created_at``'s default, and messages giving it (an executemany's rows
    share their keys: SQLAlchemy compiles it for the first row's), their JSON columns holding
    every kind of value the hot path writes."""
    defaults = [
        _message(sequence, "user", content="héllo"),
        _message(sequence + 1, "tool", content=[{"type": "text", "text": "out"}]),
    ]
    given = [
        _message(sequence + 2, "assistant", tool_calls=TOOL_CALLS, created_at=_STAMPS[0]),
        _message(sequence + 3, "assistant", thinking_blocks=THINKING, created_at=_STAMPS[1]),
        _message(sequence + 4, "assistant", content={"n": 2**70}, created_at=_STAMPS[2]),
    ]
    return defaults, given


async def _sqlalchemy_write(session: AsyncSession, statement: Executable, rows: object) -> None:
    await session.run_sync(lambda sync: sync.connection().execute(statement, rows))


async def test_writes_store_what_sqlalchemy_stores(database: Database) -> None:
    """The same rows written inline and through SQLAlchemy are stored alike, to the text of
    their dates and JSON, defaults included (``text()``: the stored values, unconverted)."""
    await _seed(database)
    log: dict[str, object] = {
        "tenant_id": TENANT,
        "key_id": None,
        "model": "m",
        "status": "ok",
        "status_code": 200,
        "prompt_tokens": 1,
        "prompt_cost": 0.0,
        "total_cost": 0.0,
        "latency_ms": 1.0,
        "context_utilization": {"notes": ["é"], "tokens_used": 1},
    }
    async with database.writing() as session:
        for rows in _written(10):
            await execute_core(session, statements.INSERT_MESSAGE, rows)
        await execute_core(session, _INSERT_LOG, {**log, "id": "req_a"})
        await execute_core(session, _INSERT_LOG, {**log, "id": "req_c", "created_at": _STAMPS[2]})
        for rows in _written(20):
            await _sqlalchemy_write(session, statements.INSERT_MESSAGE, rows)
        await _sqlalchemy_write(session, _INSERT_LOG, {**log, "id": "req_b"})
        await _sqlalchemy_write(
            session, _INSERT_LOG, {**log, "id": "req_d", "created_at": _STAMPS[2]}
        )
    async with database.reading() as session:
        stored = (await session.execute(text(_STORED))).all()
        logs = (await session.execute(text(_STORED_LOGS))).all()
    inline = [row[1:] for row in stored if 10 <= row[0] < 20]
    through = [row[1:] for row in stored if row[0] >= 20]
    assert len(inline) == 5
    assert [row[:-1] for row in inline] == [row[:-1] for row in through]
    assert [row[-1] for row in inline][2:] == [row[-1] for row in through][2:]  # given
    assert [type(row[-1]) for row in inline] == [type(row[-1]) for row in through]
    by_id = {row[0]: row[1:] for row in logs}
    assert by_id["req_a"][:-1] == by_id["req_b"][:-1]
    assert by_id["req_c"] == by_id["req_d"]
    if database.is_sqlite:  # the text SQLAlchemy writes: microseconds always, no offset
        assert [row[-1] for row in inline][2:] == [
            "2026-01-02 03:04:05.000000",
            "2026-01-02 03:04:05.000067",
            "2026-01-02 03:04:05.000067",
        ]
        assert {len(str(row[-1])) for row in inline} == {26}  # defaults written the same way
        assert by_id["req_c"][-1] == "2026-01-02 03:04:05.000067"
