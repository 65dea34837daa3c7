"""A request costs a constant number of SQL statements, whatever the conversation's length.

Counted with SQLAlchemy's ``before_cursor_execute`` event on the app's own engine (a count,
not a timing), on SQLite and on PostgreSQL: continuing a conversation of 300 stored messages
and one of 2,000 must issue exactly the same statements, and one of 10 (whose window this
process keeps) the same less the window's read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from app.conversations.messages import ConversationMessage
from app.conversations.repository import ConversationRepository
from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.core.settings import Settings
from app.main import create_app
from tests.fake_upstream import FakeUpstream

TENANT = "default"  # no master key: every caller is the default tenant
WARM_TURNS = 6  # a 2,000-message conversation is compacted within 4 turns
SUMMARY = '{"episodic": "They talked about stored messages.", "facts": []}'


async def _seed(state: Any, count: int, repeat: int = 8) -> str:
    from app.db.models import new_id

    conversation_id = new_id("conv")
    messages = []
    for index in range(count):
        role = "system" if index == 0 else ("user" if index % 2 else "assistant")
        data = {"role": role, "content": f"stored message number {index} " * repeat}
        messages.append(
            ConversationMessage(**data, token_count=state.tokens.count_message(data, "fake-model"))
        )
    async with state.database.writing() as session:
        await conversation_service.append(
            session, TENANT, conversation_id, messages, Stamp("fake-model")
        )
    return conversation_id


async def _statements_per_turn(
    settings: Settings,
    sizes: list[int],
    *,
    drain: bool = False,
    repeat: int = 8,
    seed: Callable[[Any, int], Awaitable[str]] | None = None,
) -> dict[int, list[str]]:
    """The SQL (first words) one continuing request issues, per stored-history size;
    ``drain``: the after-answer work of each turn finished before the next is counted."""
    application = create_app(settings)
    seen: dict[int, list[str]] = {}
    async with application.router.lifespan_context(application):
        state = application.state.contextgate
        # The token calibration reads its row every few seconds and writes its samples every
        # few more (app/tokens/calibration.py): by the clock, not by the history, so on a slow
        # run either may land in a counted request. Once each per test run is what is kept.
        state.calibration.refresh_s = state.calibration.flush_s = 3600.0
        engine = state.database.engine.sync_engine
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://cg") as client:
            for size in sizes:
                if seed is not None:
                    conversation_id = await seed(state, size)
                else:
                    conversation_id = await _seed(state, size, repeat)
                for turn in range(WARM_TURNS + 1):  # the last is counted: compaction caught up
                    while drain and state.background:
                        await asyncio.gather(*list(state.background), return_exceptions=True)
                    statements: list[str] = []

                    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
                        statements.append(" ".join(statement.split()[:3]))  # noqa: B023

                    event.listen(engine, "before_cursor_execute", count)
                    try:
                        response = await client.post(
                            "/v1/chat/completions",
                            json={
                                "model": "fake-model",
                                "conversation_id": conversation_id,
                                "messages": [{"role": "user", "content": f"turn {turn}"}],
                            },
                        )
                    finally:
                        event.remove(engine, "before_cursor_execute", count)
                    assert response.status_code == 200, response.text
                seen[size] = statements
    return seen


def _request_path_settings(
    make_settings: Callable[..., Settings], database_url: str, fake_upstream: FakeUpstream
) -> Settings:
    """A summarizer that answers, and no after-answer writes that could race into a count."""
    fake_upstream.script("fake-summarizer", [SUMMARY] * 200)
    return make_settings(
        database_url=database_url,
        summarizer_model="fake-summarizer",
        memory_extraction_mode="off",
        # Message vectors and periodic summaries are written in the background after a turn;
        # here they would race into the counted window. The request path is what this counts.
        embedder="bm25",
        summary_every_pairs=0,
    )


async def test_round_trips_do_not_grow_with_history(
    make_settings: Callable[..., Settings], database_url: str, fake_upstream: FakeUpstream
) -> None:
    # A summarizer that answers, so that a long conversation is compacted once and then stays
    # compacted (an unanswered compaction is retried on every request by design).
    settings = _request_path_settings(make_settings, database_url, fake_upstream)
    # The after-answer work of each turn (a 2,000-message history brought at once is compacted
    # there, run after run) finishes before the next turn is counted: the count is the request's.
    seen = await _statements_per_turn(settings, [10, 300, 2_000], drain=True)
    assert seen[300] == seen[2_000], (seen[300], seen[2_000])
    # the conversation with its summaries and the prompt owner's ledger, the window, one write
    # transaction (the guarded UPDATE, the messages, the ledger), the request log: 6 (issue 26).
    assert 0 < len(seen[2_000]) <= 6, seen[2_000]
    # A short conversation's window comes from the rows this process stored (tail_cache.py):
    # the same statements less that read.
    window = [s for s in seen[2_000] if s.startswith("SELECT messages.")]
    assert len(window) == 1, seen[2_000]
    assert seen[10] == [s for s in seen[2_000] if s not in window], (seen[10], seen[2_000])


async def test_round_trips_do_not_grow_with_history_with_message_recall_on(
    make_settings: Callable[..., Settings], database_url: str, fake_upstream: FakeUpstream
) -> None:
    """Issue 26: with message recall on (a real embedder: WordLlama's static vectors, so the
    background keeps up within a test), a continued request of a 1,000-message conversation
    issues the same statements as one of 300 (both cut by the default 8k window, compacted,
    and searched by recall): at most 7 (the conversation with its summaries and the prompt
    owner's ledger, the history window, the recalled messages, the guarded UPDATE, the
    messages, the ledger's upsert, the request log). The recall vectors
    come from the cache the background's own writes keep current, and the stored ends of the
    conversation from what this process stored (app/conversations/edges.py)."""
    fake_upstream.script("fake-summarizer", [SUMMARY] * 200)
    settings = make_settings(
        database_url=database_url,
        summarizer_model="fake-summarizer",
        memory_extraction_mode="off",
        embedder="wordllama",
        summary_every_pairs=0,
    )
    seen = await _statements_per_turn(settings, [300, 1_000], drain=True)
    assert seen[300] == seen[1_000], (seen[300], seen[1_000])
    assert 0 < len(seen[1_000]) <= 7, seen[1_000]  # the above, and the recalled messages


async def test_a_continued_turn_loads_the_window_not_the_history(
    make_settings: Callable[..., Settings],
    database_url: str,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26: the same statements are not enough, the rows they read must not grow either.
    New user turns on the kept prompt of a conversation of 2,000 stored messages, compacted
    but for its last ten turns (bench/assembly.py's steady state), load the messages from the
    compaction boundary on, not the whole history (which they did: the kept path left the
    boundary out, 10,000 rows a request at 10,000 stored messages)."""
    from bench.assembly import seed

    loaded: dict[str, list[int]] = {}
    original = ConversationRepository.context_messages

    async def counting(
        self: ConversationRepository, session: Any, conversation_id: str, **kw: Any
    ) -> Any:
        rows = await original(self, session, conversation_id, **kw)
        loaded.setdefault(conversation_id, []).append(len(rows))
        return rows

    monkeypatch.setattr(ConversationRepository, "context_messages", counting)
    settings = _request_path_settings(make_settings, database_url, fake_upstream)
    await _statements_per_turn(
        settings, [2_000], drain=True, seed=lambda state, size: seed(state, TENANT, size)
    )
    (rows,) = loaded.values()
    # The ten raw turns, the turns since and the system prompt: never the 2,000 stored.
    assert max(rows[1:]) <= 20 + 2 * (WARM_TURNS + 1) + 1, rows
