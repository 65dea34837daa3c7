"""Message vectors for recall, embedded after the turn at a bounded rate (issue 26).

After each turn the conversation's messages without a vector are embedded, newest first, in
batches: one job per conversation at a time (a turn that ends while its conversation's job runs
asks it to go round once more instead of starting another), one batch at a time in the process,
and after each batch the job sleeps as long as the batch took, so a long history imported at
once is embedded over minutes, on at most about half a core, while requests stay fast. Recall
searches what is embedded so far (app/recall/search.py says so in ``notes``).
"""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.settings import Settings
from app.core.tasks import spawn
from app.db.models import Conversation
from app.db.repository import conversation_scope
from app.embedders.embedder import Embedder, EmbeddingFailed
from app.recall.message_vectors import (
    MissingMessage,
    MissingQuery,
    VectorOwner,
    embed_messages,
    excluded_tool_results,
    missing_messages,
    save_message_vectors,
)
from app.recall.services import RecallServices, VectorBacklog

__all__ = ["BACKLOG_BATCH", "BACKLOG_DUTY", "VectorBacklog", "schedule_message_vectors"]

logger = logging.getLogger(__name__)

BACKLOG_BATCH = 64  # messages per batch at most (fewer when the embedder's request batch is)
BACKLOG_DUTY = 0.5  # share of the wall time the backlog's batches may take


def schedule_message_vectors(
    services: RecallServices,
    settings: Settings,
    key: tuple[str, str],
    user: str | None,
    *,
    textless_at: int | None = None,
) -> None:
    """After a turn is stored: embed its messages (and any older ones still without), and the
    tool results the cache-aware fit has cleared, in the background at a bounded rate.
    ``key``: (tenant, conversation). ``textless_at``: the turn brought no text to embed (an
    agent's tool-loop step: tool results and tool calls) and the conversation's tool results
    are cleared below this sequence; when this process's last job for the conversation left
    nothing to embed at that sequence, no job starts (it would read the conversation back to
    find nothing, on every call of the loop)."""
    if services.embedder is None or not settings.message_recall:
        return
    if textless_at is not None and services.backlog.settled(key) == textless_at:
        return
    if services.backlog.start(key, user):
        exclude = frozenset(settings.cache_exclude_tools)
        spawn(services.tasks, _run(services, exclude, key, user))


async def _run(
    services: RecallServices, exclude: frozenset[str], key: tuple[str, str], user: str | None
) -> None:
    backlog = services.backlog
    try:
        while True:
            await _vectorize_conversation(services, exclude, key, user)
            again, user = backlog.finish(key)
            if not again:
                return
    except BaseException:  # cancelled (shutdown): the next turn starts a new job
        backlog.drop(key)
        raise


async def _vectorize_conversation(
    services: RecallServices, exclude: frozenset[str], key: tuple[str, str], user: str | None
) -> None:
    embedder = services.embedder
    if embedder is None:
        return
    backlog = services.backlog
    tenant_id, conversation_id = key
    owner = VectorOwner(tenant_id, conversation_id, user, embedder.name)
    batch = max(1, min(BACKLOG_BATCH, embedder.request_batch))
    before: int | None = None
    cleared: int | None = None
    try:
        while True:
            async with services.database.reading() as session:
                if cleared is None:
                    cleared = await _cleared_sequence(session, tenant_id, conversation_id)
                wanted = MissingQuery(
                    before_sequence=before, tools_before=cleared, limit=batch, newest_first=True
                )
                missing = await missing_messages(
                    session, tenant_id, conversation_id, embedder.name, wanted
                )
                excluded = await excluded_tool_results(
                    session, tenant_id, conversation_id, missing, exclude
                )
            if not missing or _nothing_to_store(missing, batch, first=before is None):
                backlog.mark(key, False)
                backlog.settle(key, cleared)
                return
            backlog.mark(key, before is not None or len(missing) == batch)
            took = await _embed_batch(services, embedder, owner, missing, excluded)
            if len(missing) < batch:
                backlog.mark(key, False)
                backlog.settle(key, cleared)
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
    services: RecallServices,
    embedder: Embedder,
    owner: VectorOwner,
    missing: list[MissingMessage],
    excluded: set[int],
) -> float:
    """Embed and store one batch (one batch at a time in the process); its seconds."""
    backlog = services.backlog
    async with backlog.slot:
        started = time.monotonic()
        vectors = await embed_messages(embedder, missing, excluded)
        took = time.monotonic() - started
    await save_message_vectors(services, owner, missing, vectors)
    backlog.batches += 1
    return took
