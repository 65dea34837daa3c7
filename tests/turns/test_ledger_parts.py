"""The prompt ledger is stored append-only (issue 26): a call that keeps the prompt writes only
what it appended, a rebase writes the whole prompt as a new base, and a reader puts the parts
back together (from this process's memory of them, else with one more statement), refusing
parts that do not chain up."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
from sqlalchemy import event, select, update

from app.core.settings import Settings
from app.db.models import PromptLedgerRow
from app.main import create_app
from app.state import AppState
from app.turns.ledger_parts import LedgerParts
from app.turns.ledger_repository import ledger_parts
from app.turns.owner import PromptRecord, join_arrays
from tests.fake_upstream import FakeUpstream
from tests.support.tool_loop import READ_FILE_TOOLS

STEPS = 4
TOOLS = READ_FILE_TOOLS
WORDS = "def class return import self value result config request response handler".split()


def _file(rng: random.Random, step: int) -> str:
    lines = [" ".join(rng.choice(WORDS) for _ in range(10)) for _ in range(40)]
    # The fake upstream answers a tool result ending so with the next call (a loop).
    return "\n".join(lines) + f'\nCALL_TOOL:read_file:{{"path": "src/f{step + 1}.py"}}'


class _Loop:
    """An agent's tool loop, its whole history resent on every call."""

    def __init__(self, client: httpx.AsyncClient, state: AppState) -> None:
        self.client, self.state = client, state
        self.rng = random.Random(26)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the failing tests. " + _file(self.rng, 0)},
        ]

    async def call(self) -> dict[str, Any]:
        body = {"model": "agent-model", "messages": self.messages, "tools": TOOLS}
        response = await self.client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        tool_calls = answer["choices"][0]["message"]["tool_calls"]
        self.messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        step = len(self.messages)
        self.messages.append(
            {"role": "tool", "tool_call_id": tool_calls[0]["id"], "content": _file(self.rng, step)}
        )
        while self.state.background:  # the after-answer work, before the next call
            await next(iter(self.state.background))
        utilization: dict[str, Any] = answer["context_utilization"]
        return utilization

    async def parts(self) -> list[PromptLedgerRow]:
        async with self.state.database.reading() as session:
            rows = await session.execute(select(PromptLedgerRow).order_by(PromptLedgerRow.part))
            return list(rows.scalars())


@asynccontextmanager
async def _agent(settings: Settings) -> AsyncIterator[_Loop]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://cg") as client:
            yield _Loop(client, application.state.contextgate)


def _count_ledger_reads(state: AppState) -> tuple[list[str], Callable[[], None]]:
    seen: list[str] = []

    def count(_c: object, _cursor: object, statement: str, *_args: object) -> None:
        if "FROM prompt_ledger_parts" in statement:
            seen.append(statement)

    engine = state.database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    return seen, lambda: event.remove(engine, "before_cursor_execute", count)


async def test_each_kept_call_writes_only_what_it_appended(
    make_settings: Callable[..., Settings], database_url: str, fake_upstream: FakeUpstream
) -> None:
    settings = make_settings(database_url=database_url, default_context_window=200_000)
    async with _agent(settings) as loop:
        for _ in range(STEPS):
            utilization = await loop.call()
        assert utilization["cache_stats"]["rebased"] is False
        parts = await loop.parts()
        sent = (await fake_upstream.arequests())[-1]["body"]["messages"]

    assert [p.part for p in parts] == list(range(STEPS))
    assert {p.base_part for p in parts} == {0}
    assert parts[0].previous_chain == ""
    for earlier, later in zip(parts, parts[1:], strict=False):
        assert later.previous_chain == earlier.chain_hash
        # The previous answer and the new tool result: nothing of the resent history.
        appended = orjson.loads(later.messages)
        assert [m["role"] for m in appended] == ["assistant", "tool"]
    # The parts put together are the prompt the last call sent, byte for byte.
    assert orjson.loads(join_arrays([p.messages for p in parts])) == sent


async def test_a_process_that_did_not_write_the_parts_reads_them_once(
    make_settings: Callable[..., Settings], database_url: str, fake_upstream: FakeUpstream
) -> None:
    """Another worker (or a restart): the parts come back in one more statement, the prompt
    is still kept; the next call finds them in memory again."""
    settings = make_settings(database_url=database_url, default_context_window=200_000)
    async with _agent(settings) as loop:
        for _ in range(3):
            await loop.call()
        seen, stop = _count_ledger_reads(loop.state)
        await loop.call()  # parts this process wrote: the newest comes with the conversation
        remembered = len(seen)
        ledger_parts.clear()
        await loop.call()
        after_restart = len(seen) - remembered
        utilization = await loop.call()
        stop()
        total = len(seen)

    assert remembered == 1
    assert after_restart == 2  # the newest part with the conversation, then the ones before it
    assert total - remembered - after_restart == 1
    assert utilization["cache_stats"]["rebased"] is False


async def test_parts_that_do_not_chain_up_are_no_ledger(
    make_settings: Callable[..., Settings], database_url: str, fake_upstream: FakeUpstream
) -> None:
    """A part another writer replaced: the prompt is assembled anew and stored as one base."""
    settings = make_settings(database_url=database_url, default_context_window=200_000)
    async with _agent(settings) as loop:
        for _ in range(3):
            await loop.call()
        async with loop.state.database.writing() as session:
            await session.execute(
                update(PromptLedgerRow).where(PromptLedgerRow.part == 1).values(chain_hash="x")
            )
        ledger_parts.clear()
        utilization = await loop.call()
        parts = await loop.parts()
        sent = (await fake_upstream.arequests())[-1]["body"]["messages"]

    assert utilization["cache_stats"]["rebased"] is True
    assert [(p.part, p.base_part) for p in parts] == [(0, 0)]
    assert orjson.loads(parts[0].messages) == sent


async def test_decoded_parts_are_shared_and_never_changed_in_place(
    make_settings: Callable[..., Settings], database_url: str, fake_upstream: FakeUpstream
) -> None:
    """The kept prompt's earlier parts are decoded once and handed out on every call: after a
    loop whose every call sent them (and marked them for the cache), the remembered messages
    still equal the stored parts decoded anew."""
    settings = make_settings(database_url=database_url, default_context_window=200_000)
    ledger_parts.clear()
    async with _agent(settings) as loop:
        for _ in range(STEPS):
            await loop.call()
        parts = await loop.parts()
        [entry] = ledger_parts._entries.values()
        decoded = [d for d in entry.decoded if d is not None]
        assert len(decoded) >= STEPS - 2  # the parts before the newest, decoded when read
        for part, messages in zip(entry.parts, entry.decoded, strict=True):
            if messages is not None:
                assert list(messages) == orjson.loads(part)
        assert [p.messages for p in parts][: len(entry.parts) - 1] == list(entry.parts[:-1])


def test_a_part_is_decoded_once_while_it_is_remembered() -> None:
    parts = LedgerParts(max_bytes=1000)
    one, two = b'[{"role":"user","content":"a"}]', b'[{"role":"tool","content":"b"}]'
    parts.put("t1", "c1", 0, (one,), "chain1")
    first = parts.messages("t1", "c1", (one,))
    assert parts.size == 4 * len(one)  # the bytes, and their decoding weighed at three times
    parts.put("t1", "c1", 0, (one, two), "chain2")  # the next part: the first keeps its decoding
    again = parts.messages("t1", "c1", (one, two))
    assert again[0] is first[0]
    assert list(again) == [*orjson.loads(one), *orjson.loads(two)]
    # A part that is not the remembered object (read back from the database) is decoded anew.
    fresh = parts.messages("t1", "c1", (bytes(bytearray(one)),))
    assert fresh == first
    assert fresh[0] is not first[0]
    assert parts.messages("t2", "c1", (one,))[0] is not first[0]  # another tenant's memory


def test_remembered_parts_are_found_only_by_their_chain() -> None:
    parts = LedgerParts(max_bytes=100)
    parts.put("t1", "c1", 0, (b"[1]", b"[2]", b"[3]"), "chain3")
    # This process wrote the newest part (2): the parts before it.
    assert parts.prefix("t1", "c1", (0, 2, "chain3", "chain2")) == (b"[1]", b"[2]")
    # It read up to part 2; another worker wrote part 3 after it.
    assert parts.prefix("t1", "c1", (0, 3, "chain4", "chain3")) == (b"[1]", b"[2]", b"[3]")
    assert parts.prefix("t1", "c1", (0, 3, "chain4", "other")) is None  # not the same prompt
    assert parts.prefix("t1", "c1", (1, 3, "chain4", "chain3")) is None  # another base
    assert parts.prefix("t2", "c1", (0, 3, "chain4", "chain3")) is None  # another tenant
    parts.put("t1", "c2", 0, (b"[" + b"0" * 60 + b"]",), "x")
    parts.put("t1", "c3", 0, (b"[" + b"0" * 60 + b"]",), "y")  # over 100 bytes: oldest out
    assert parts.prefix("t1", "c1", (0, 2, "chain3", "chain2")) is None
    assert parts.size <= 100


def test_a_turn_on_a_branch_stores_its_prompt_whole() -> None:
    record = PromptRecord(
        epoch=2,
        own_system_hash="s",
        attachments_key="",
        encoded_messages=b'[{"role":"tool","content":"c"}]',
        tokens=10,
        system_tokens=1,
        memory_tokens=0,
        artifacts=[],
        part=2,
        base_part=0,
        previous_chain="h1",
        prefix_parts=(b'[{"role":"user","content":"a"}]', b"[]"),
    )
    base = record.as_base()
    assert (base.part, base.base_part, base.previous_chain, base.prefix_parts) == (0, 0, "", ())
    assert orjson.loads(base.encoded_messages) == [
        {"role": "user", "content": "a"},
        {"role": "tool", "content": "c"},
    ]
