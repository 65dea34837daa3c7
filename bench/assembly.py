"""Context assembly time against the number of stored messages (issue 2's history curve).

For each size N a conversation of N stored messages (~100 tokens each, so that even 100 of
them exceed the default 8k window and the loaded tail is the same size for every N) is
seeded straight into the database, then ``prepare()`` (resolve, count, load the window,
memory/context engine, assemble) is timed for a request that continues it by id with one
short user message, and so is the whole request through the ASGI app (upstream included).
Every SQL statement is counted too: the count must not depend on N. The summarizer answers
(scripted on the fake upstream), so a long conversation is compacted within its first few
turns, which are not measured: what is measured is the steady state.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import app  # noqa: F401  (offline defaults before litellm is imported)
from bench.inprocess import inprocess_app, turn

FILLER = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly "
    "numbers, the weather report, the shipping manifest and the list of open questions about "
    "the migration plan, which is due next week and still needs two more approvals. "
) * 2


async def seed(state: Any, tenant_id: str, count: int, *, vectors: bool = True) -> str:
    """A conversation of ``count`` stored messages (system prompt first), stored in one go;
    ``vectors``: with their recall vectors, as the background leaves them (else a backlog)."""
    from app.conversations.messages import ConversationMessage
    from app.conversations.service import conversation_service
    from app.conversations.stamp import Stamp
    from app.db.models import new_id

    conversation_id = new_id("conv")
    messages: list[ConversationMessage] = []
    for index in range(count):
        role = "system" if index == 0 else ("user" if index % 2 else "assistant")
        content = "You are helpful." if index == 0 else f"message {index}. {FILLER}"
        data = {"role": role, "content": content}
        messages.append(
            ConversationMessage(**data, token_count=state.tokens.count_message(data, "gpt-4o"))
        )
    async with state.database.writing() as session:
        for start in range(0, count, 2000):
            conversation = await conversation_service.append(
                session,
                tenant_id,
                conversation_id,
                messages[start : start + 2000],
                Stamp("bench-model"),
            )
        _mark_compacted(session, conversation, messages)
    if vectors and state.embedder is not None:
        await _seed_vectors(state, tenant_id, conversation_id)
    return conversation_id


async def _seed_vectors(state: Any, tenant_id: str, conversation_id: str) -> None:
    """Steady state of message recall too: every message embedded as it was stored (random
    unit vectors of the embedder's size: what is timed is the search, not the model)."""
    import numpy as np
    from sqlalchemy import insert, select

    from app.db.models import Message, MessageVector
    from app.embedders.embedder import encode_vector

    rng = np.random.default_rng(26)
    dimensions = int(getattr(state.embedder, "dimensions", 384))
    async with state.database.writing() as session:
        rows = (
            await session.execute(
                select(
                    Message.id, Message.sequence_number, Message.turn_number, Message.role,
                    Message.created_at,
                ).where(Message.conversation_id == conversation_id)
            )
        ).all()  # fmt: skip
        values = []
        for row in rows:
            vector = rng.standard_normal(dimensions).astype(np.float32)
            values.append(
                {
                    "message_id": row.id, "conversation_id": conversation_id,
                    "tenant_id": tenant_id, "user_id": None,
                    "sequence_number": row.sequence_number, "turn_number": row.turn_number,
                    "role": row.role, "embedding": encode_vector(vector / np.linalg.norm(vector)),
                    "embedding_model": state.embedder.name, "created_at": row.created_at,
                }
            )  # fmt: skip
        await session.execute(insert(MessageVector), values)


RAW_TAIL_TURNS = 10


def _mark_compacted(session: Any, conversation: Any, messages: list[Any]) -> None:
    """Steady state: all but the last turns covered by one summary, as if compacted as it grew.

    (A history imported all at once is compacted a few windows per turn; that catch-up is the
    memory engine's business, not what this curve measures.)
    """
    from app.db.models import ConversationSummaryRow

    last_turn = max(m.turn_number for m in messages)
    covered = last_turn - RAW_TAIL_TURNS
    if covered < 1:
        return
    first_raw = next(m for m in messages if m.turn_number == covered + 1)
    conversation.compacted_turn = covered
    conversation.compacted_sequence = first_raw.sequence_number
    conversation.compacted_tokens = first_raw.start_tokens
    session.add(
        ConversationSummaryRow(
            conversation_id=conversation.id,
            tenant_id=conversation.tenant_id,
            level=0,
            first_turn=1,
            last_turn=covered,
            start_tokens=conversation.system_prompt_tokens,
            end_tokens=first_raw.start_tokens,
            episodic=f"Turns 1-{covered}: the quarterly numbers and the migration plan.",
            facts=[],
            token_count=20,
            model="fake-summarizer",
        )
    )


class StatementCounter:
    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.count = 0
        self._engine = engine.sync_engine
        event.listen(self._engine, "before_cursor_execute", self._on_execute)

    def _on_execute(self, *_args: Any) -> None:
        self.count += 1

    def close(self) -> None:
        from sqlalchemy import event

        event.remove(self._engine, "before_cursor_execute", self._on_execute)


SUMMARY = '{"episodic": "They discussed the quarterly numbers and the migration.", "facts": []}'
MAX_WARM_TURNS = 80  # a seeded, never-compacted history is compacted a few windows per turn


def _steady(counts: list[int]) -> bool:
    """Three turns in a row with the same statement count: compaction has caught up."""
    return len(counts) >= 3 and counts[-1] == counts[-2] == counts[-3]


async def _turn(
    client: Any, state: Any, conversation_id: str, body: dict[str, Any] | str
) -> tuple[int, float]:
    """One request through the app: (its statements, ms). The previous turn's after-answer
    work is finished first and this one's after: the count is the request's own."""
    if isinstance(body, str):
        body = turn(body, conversation_id)
    await _drain(state)
    counter = StatementCounter(state.database.engine)
    started = time.perf_counter()
    response = await client.post("/chat/completions", json=body)
    elapsed = (time.perf_counter() - started) * 1000
    counter.close()
    await _drain(state)
    response.raise_for_status()
    return counter.count, elapsed


async def _warm_up(client: Any, state: Any, conversation_id: str) -> int:
    """Turns until compaction has caught up with a seeded history; how many it took."""
    warm, history = 0, list[int]()
    while warm < MAX_WARM_TURNS and not _steady(history):
        count, _ = await _turn(client, state, conversation_id, f"warm {warm}")
        history.append(count)
        warm += 1
    return warm


async def _drain(state: Any) -> None:
    import asyncio

    while state.background:
        await asyncio.gather(*list(state.background), return_exceptions=True)
    # The learned token ratios are written every few seconds in the background: written now,
    # they cannot fall into the next request's count.
    await state.calibration.flush()


async def measure(
    fake: Any,
    database_url: str,
    sizes: list[int],
    repeats: int,
) -> list[dict[str, Any]]:
    from app.keys.caller import Caller
    from app.protocol.chat import ChatCompletionRequest
    from app.turns.context import TurnContext
    from app.turns.pipeline import new_request_id, prepare

    # The summarizer answers (scripted), so that long conversations are compacted once and
    # then measured in their steady state, as they would be in service.
    fake.script("fake-summarizer", [SUMMARY] * 400)
    rows: list[dict[str, Any]] = []
    settings = {"summarizer_model": "fake-summarizer", "memory_extraction_mode": "off"}
    async with inprocess_app(fake.base_url, database_url, **settings) as (application, client):
        state = application.state.contextgate
        caller = Caller(tenant_id="default")
        conversations: dict[int, str] = {}
        warm_turns: dict[int, int] = {}
        for size in sizes:
            conversations[size] = await seed(state, caller.tenant_id, size)
            warm_turns[size] = await _warm_up(client, state, conversations[size])
        prepare_ms: dict[int, list[float]] = {size: [] for size in sizes}
        request_ms: dict[int, list[float]] = {size: [] for size in sizes}
        statements: dict[int, list[int]] = {size: [] for size in sizes}
        sent: dict[int, int] = {}
        # Round-robin over the sizes, as bench.run interleaves its targets: a machine that
        # slows down for a while slows every size alike, not the one measured then.
        for index in range(repeats):
            for position, size in enumerate(sizes):
                conversation_id = conversations[size]
                # A question of its own each time: the recall query's embedding (~5-8 ms of
                # MiniLM) is remembered by text. And the same number of tokens for every size:
                # "about 10000" is one WordPiece more than "about 100", and MiniLM's time grows
                # with the tokens (the curve read 1.2x at 10,000 partly from that one token).
                number = index * len(sizes) + position  # < 1,000: a single token
                body = turn(f"next question {number} of the curve", conversation_id)
                request = ChatCompletionRequest.model_validate(body)
                context = TurnContext(request, caller, new_request_id(), time.perf_counter())
                started = time.perf_counter()
                prepared = await prepare(state, context)
                prepare_ms[size].append((time.perf_counter() - started) * 1000)
                sent[size] = len(prepared.messages)
                count, total = await _turn(client, state, conversation_id, body)
                request_ms[size].append(total)
                statements[size].append(count)
        for size in sizes:
            rows.append(
                {
                    "stored": size,
                    "prepare_ms": statistics.median(prepare_ms[size]),
                    "request_ms": statistics.median(request_ms[size]),
                    "sent_messages": sent[size],
                    "statements": max(statements[size]),
                    "warm_turns": warm_turns[size],
                }
            )
    return rows


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [row["stored"] for row in rows]
    figure, axis = plt.subplots(figsize=(7, 4.2), dpi=110)
    axis.plot(sizes, [row["prepare_ms"] for row in rows], "o-", label="context assembly (prepare)")
    axis.plot(sizes, [row["request_ms"] for row in rows], "s--", label="whole request (in-process)")
    axis.set_xscale("log")
    axis.set_xlabel("stored messages in the conversation")
    axis.set_ylabel("median time (ms)")
    axis.set_ylim(bottom=0)
    axis.set_title(title, fontsize=10)
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


async def measure_import(
    fake: Any, database_url: str, count: int = 10_000, follow: int = 6, pause_s: float = 1.0
) -> dict[str, Any]:
    """A history of ``count`` messages brought by one request (as a client migrating from
    another tool would), then ``follow`` requests continuing it by id, ``pause_s`` apart, the
    server's after-answer work left running as in service: each one's time, how many of the
    history's messages have a recall vector by then, and what ``context_utilization.notes``
    says about it."""
    import asyncio

    from sqlalchemy import func, select

    from app.db.models import MessageVector

    fake.script("fake-summarizer", [SUMMARY] * 400)
    settings = {
        "summarizer_model": "fake-summarizer",
        "memory_extraction_mode": "off",
        "max_messages": count + 10,
    }
    history = [{"role": "system", "content": "You are helpful."}]
    for index in range(1, count):
        role = "user" if index % 2 else "assistant"
        history.append({"role": role, "content": f"message {index}. {FILLER}"})
    if history[-1]["role"] != "user":
        history.append({"role": "user", "content": "And now?"})
    rows: list[dict[str, Any]] = []
    async with inprocess_app(fake.base_url, database_url, **settings) as (application, client):
        state = application.state.contextgate
        started = time.perf_counter()
        first = await client.post(
            "/chat/completions", json={"model": "bench-model", "messages": history}
        )
        first.raise_for_status()
        rows.append({"request": "import", "ms": (time.perf_counter() - started) * 1000})
        conversation_id = first.json()["conversation_id"]
        for index in range(follow):
            await asyncio.sleep(pause_s)
            started = time.perf_counter()
            response = await client.post(
                "/chat/completions", json=turn(f"follow-up {index}", conversation_id)
            )
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            notes = response.json().get("context_utilization", {}).get("notes", [])
            async with state.database.reading() as session:
                embedded = await session.scalar(
                    select(func.count(MessageVector.id)).where(
                        MessageVector.conversation_id == conversation_id
                    )
                )
            rows.append(
                {
                    "request": f"continue {index + 1}",
                    "ms": elapsed,
                    "vectors": int(embedded or 0),
                    "notes": [n for n in notes if n.startswith(("message recall", "compaction"))],
                }
            )
        for task in list(state.background):  # the backlog goes on in service; here it stops
            task.cancel()
    return {"count": count, "rows": rows}
