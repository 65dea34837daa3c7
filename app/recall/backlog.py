"""Message vectors for recall, embedded after the turn at a bounded rate (issue 26).

After each turn the conversation's messages without a vector are embedded, newest first, in
batches: one job per conversation at a time (a turn that ends while its conversation's job runs
asks it to go round once more instead of starting another), one batch at a time in the process,
and after each batch the job sleeps as long as the batch took, so a long history imported at
once is embedded over minutes, on at most about half a core, while requests stay fast. Recall
searches what is embedded so far (app/memories/recall.py says so in ``notes``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.state import AppState
from app.db.models import Conversation
from app.db.repository import conversation_scope
from app.memories.embedder import Embedder, EmbeddingFailed
from app.memories.vectors import (
    MissingMessage,
    embed_messages,
    excluded_tool_results,
    missing_messages,
    save_message_vectors,
    spawn,
)

__all__ = ["BACKLOG_BATCH", "BACKLOG_DUTY", "VectorBacklog", "schedule_message_vectors"]

logger = logging.getLogger(__name__)

BACKLOG_BATCH = 64  # messages per batch at most (fewer when the embedder's request batch is)
BACKLOG_DUTY = 0.5  # share of the wall time the backlog's batches may take


class VectorBacklog:
    """Which conversations have a vector job running, and the process's one embedding slot."""

    def __init__(self) -> None:
        self._again: dict[tuple[str, str], str | None] = {}  # running job -> its latest user
        self._rerun: set[tuple[str, str]] = set()
        self.slot = asyncio.Lock()
        self._behind: set[tuple[str, str]] = set()  # a job found more than one batch
        self.batches = 0  # batches embedded so far (benchmarks read it)

    def running(self, tenant_id: str, conversation_id: str) -> bool:
        return (tenant_id, conversation_id) in self._again

    def behind(self, tenant_id: str, conversation_id: str) -> bool:
        """Whether this process is embedding a backlog of the conversation (recall says so)."""
        return (tenant_id, conversation_id) in self._behind

    def mark(self, key: tuple[str, str], behind: bool) -> None:
        if behind:
            self._behind.add(key)
        else:
            self._behind.discard(key)

    def start(self, key: tuple[str, str], user: str | None) -> bool:
        """True: start a job for ``key``; False: one runs and will go round once more."""
        if key in self._again:
            self._again[key] = user or self._again[key]
            self._rerun.add(key)
            return False
        self._again[key] = user
        return True

    def drop(self, key: tuple[str, str]) -> None:
        self._behind.discard(key)
        self._rerun.discard(key)
        self._again.pop(key, None)

    def finish(self, key: tuple[str, str]) -> tuple[bool, str | None]:
        """(go round once more, with this user) when a turn asked while the job ran."""
        if key in self._rerun:
            self._rerun.discard(key)
            return True, self._again.get(key)
        self._again.pop(key, None)
        return False, None


def schedule_message_vectors(
    state: AppState, tenant_id: str, conversation_id: str, user: str | None
) -> None:
    """After a turn is stored: embed its messages (and any older ones still without), and the
    tool results the cache-aware fit has cleared, in the background at a bounded rate."""
    if state.embedder is None or not state.settings.message_recall:
        return
    key = (tenant_id, conversation_id)
    if state.memory.vector_backlog.start(key, user):
        spawn(state, _run(state, key, user))


async def _run(state: AppState, key: tuple[str, str], user: str | None) -> None:
    backlog = state.memory.vector_backlog
    try:
        while True:
            await _vectorize_conversation(state, backlog, key, user)
            again, user = backlog.finish(key)
            if not again:
                return
    except BaseException:  # cancelled (shutdown): the next turn starts a new job
        backlog.drop(key)
        raise


async def _vectorize_conversation(
    state: AppState, backlog: VectorBacklog, key: tuple[str, str], user: str | None
) -> None:
    embedder = state.embedder
    if embedder is None:
        return
    tenant_id, conversation_id = key
    batch = max(1, min(BACKLOG_BATCH, embedder.request_batch))
    before: int | None = None
    cleared: int | None = None
    try:
        while True:
            async with state.database.reading() as session:
                if cleared is None:
                    cleared = await _cleared_sequence(session, tenant_id, conversation_id)
                missing = await missing_messages(
                    session, tenant_id, conversation_id, embedder.name,
                    before_sequence=before, tools_before=cleared, limit=batch, newest_first=True,
                )  # fmt: skip
                excluded = await excluded_tool_results(
                    session, tenant_id, conversation_id, missing,
                    frozenset(state.settings.cache_exclude_tools),
                )  # fmt: skip
            if not missing or _nothing_to_store(missing, batch, first=before is None):
                backlog.mark(key, False)
                return
            backlog.mark(key, before is not None or len(missing) == batch)
            took = await _embed_batch(state, backlog, embedder, key, user, missing, excluded)
            if len(missing) < batch:
                backlog.mark(key, False)
                return
            before = min(m.sequence_number for m in missing)
            await asyncio.sleep(took * (1 / BACKLOG_DUTY - 1))  # the bounded rate
    except EmbeddingFailed as exc:
        logger.warning("message vectors failed", extra={"error": str(exc)})
    except Exception:
        logger.warning("message vectors failed", exc_info=True)


def _nothing_to_store(missing: list[MissingMessage], batch: int, *, first: bool) -> bool:
    """Only messages without text (an agent's tool calls), no vector of another embedder, and
    room for more: their empty rows wait for a batch with something to embed (or a full one),
    instead of a write transaction after every call of a tool loop."""
    return first and len(missing) < batch and not any(m.text or m.stale for m in missing)


async def _cleared_sequence(session: AsyncSession, tenant_id: str, conversation_id: str) -> int:
    cleared = await session.scalar(
        select(Conversation.cache_cleared_sequence).where(
            Conversation.id == conversation_id, conversation_scope.tenant_clause(tenant_id)
        )
    )
    return int(cleared or 0)


async def _embed_batch(
    state: AppState,
    backlog: VectorBacklog,
    embedder: Embedder,
    key: tuple[str, str],
    user: str | None,
    missing: list[Any],
    excluded: set[int],
) -> float:
    """Embed and store one batch (one batch at a time in the process); its seconds."""
    async with backlog.slot:
        started = time.monotonic()
        vectors = await embed_messages(embedder, missing, excluded)
        took = time.monotonic() - started
    await save_message_vectors(state, *key, user, embedder.name, missing, vectors)
    backlog.batches += 1
    return took
