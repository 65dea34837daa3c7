"""Keep each user's retrieval index (memory_index.py) in step with the database, incrementally.

Per request, one signature query (count, latest update, embedder) of the user's active memories
decides (covering index, no row read):

- unchanged: the cached index is used as it is;
- changed: the rows updated since the cached latest update (minus a margin for writers whose
  clocks or commits lag) are applied to the cached index; when the count still differs, memories
  were deleted (no row says which): the active ids are read and the index keeps those;
- no cached index, another embedder, or a large change: built from all rows, on a thread.

Another worker's write changes the signature, so every process sees it at its next query. The
index is cached per process for (tenant, user): one user never reads another's index.

Memories without a vector for the current embedder (at most ``_LAZY_LIMIT`` per request) are
embedded here and written back in the background (memory_vectors.py). A BM25 snapshot missing new or
changed memories is rebuilt in the background from the kept tokens, or before a query that
shares a term with one of them (``ensure_lexical``). After this process stores memories,
``refresh_soon`` does all that in the background, before the next query asks.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.database import Database
from app.core.tasks import Tasks, spawn
from app.embedders.embedder import Embedder, EmbeddingFailed
from app.memories.indexes import MemoryIndexes
from app.memories.lexical import LexicalIndex
from app.memories.memory_index import MemoryRow, UserIndex
from app.memories.memory_vectors import save_memory_vectors
from app.memories.repository import memory_repository

__all__ = ["IndexServices", "ensure_lexical", "refresh_soon", "user_index"]

logger = logging.getLogger(__name__)

# Missing vectors computed per background step (the request computes the embedder's
# ``request_batch`` itself).
_BACKGROUND_BATCH = 256
# Rows updated this long before the cached latest update are read again when catching up: a
# write committed late (or stamped by a slower clock) is not missed.
_OVERLAP = timedelta(seconds=60)
# A change this large is cheaper to load whole, off the event loop.
_FULL_LOAD_ABOVE = 2000
# A background BM25 rebuild waits this long: the request that saw the change finishes first
# (the build holds the GIL most of its ~0.3 s at 10,000 memories), and a burst of writes is
# taken in one build.
_REBUILD_DELAY_S = 0.25


@dataclass(frozen=True, slots=True)
class IndexServices:
    """What keeping users' retrieval indexes up to date uses: the database (a refresh reads it,
    memory vectors are written back), the process's cached indexes, the embedder (None: BM25
    only) and the background tasks."""

    database: Database
    indexes: MemoryIndexes
    embedder: Embedder | None
    tasks: Tasks


async def user_index(
    services: IndexServices,
    session: AsyncSession,
    tenant_id: str,
    user: str,
    notes: list[str] | None = None,
) -> UserIndex:
    """The user's index, up to date with the database as of this call."""
    runtime = services.indexes
    embedder = services.embedder
    name = embedder.name if embedder is not None else None
    key = (tenant_id, user)
    signature = (*await memory_repository.memory_signature(session, tenant_id, user), name)
    cached = runtime.cached_index(key, signature)
    if isinstance(cached, UserIndex) and (embedder is None or cached.has_vector.all()):
        return cached
    lock = runtime.index_lock(key)
    waited = lock.locked()
    async with lock:
        if waited:  # another request may have brought it up to date meanwhile
            signature = (*await memory_repository.memory_signature(session, tenant_id, user), name)
        entry = runtime.cached_entry(key)
        index: UserIndex | None = None
        if entry is not None and isinstance(entry[1], UserIndex):
            index = entry[1] if entry[1].embedder_name == name else None
        if index is not None and entry is not None and entry[0] != signature:
            since = entry[0][1]
            if since is None or not await _catch_up(session, tenant_id, user, index, since):
                index = None
        if index is None:
            rows = await memory_repository.memory_rows(session, tenant_id, user)
            facts = await memory_repository.active_memory_ids(session, tenant_id, user, facts=True)
            index = await asyncio.to_thread(UserIndex.build, rows, name, facts)
        if index.count != signature[0]:
            await _reconcile(session, tenant_id, user, index)
        if embedder is not None and not index.has_vector.all():
            await _embed_missing(services, embedder, tenant_id, index, notes)
        runtime.store_index(key, signature, index)
    if index.lexical_stale:
        _rebuild_lexical_later(services.tasks, index)
    return index


async def _catch_up(
    session: AsyncSession, tenant_id: str, user: str, index: UserIndex, since: datetime
) -> bool:
    """Apply the rows changed since ``since``; False: too many, load the index whole."""
    changes = await memory_repository.memory_changes(session, tenant_id, user, since - _OVERLAP)
    if len(changes) > _FULL_LOAD_ABOVE:
        return False
    index.apply([MemoryRow.of(row) for row in changes])
    return True


async def _reconcile(session: AsyncSession, tenant_id: str, user: str, index: UserIndex) -> None:
    """The count differs from the signature's: keep the active memories, read absent ones."""
    active = await memory_repository.active_memory_ids(session, tenant_id, user, facts=False)
    facts = await memory_repository.active_memory_ids(session, tenant_id, user, facts=True)
    index.retain(set(active), set(facts))
    absent = [memory_id for memory_id in active if memory_id not in index]
    if absent:
        rows = await memory_repository.memory_rows(session, tenant_id, user, absent)
        index.apply([MemoryRow.of(row) for row in rows])


async def _embed_missing(
    services: IndexServices,
    embedder: Embedder,
    tenant_id: str,
    index: UserIndex,
    notes: list[str] | None,
) -> None:
    """Embed what the request can afford (``embedder.request_batch``: thousands for a bag of
    word vectors, a few dozen for a transformer); the rest in the background, meanwhile those
    memories are found by BM25 alone."""
    if index.embedding_rest:  # the background is on it
        return
    await _embed_batch(services, embedder, tenant_id, index, embedder.request_batch, notes)
    if not index.has_vector.all():
        index.embedding_rest = True
        spawn(services.tasks, _embed_rest(services, embedder, tenant_id, index))


async def _embed_batch(
    services: IndexServices,
    embedder: Embedder,
    tenant_id: str,
    index: UserIndex,
    limit: int,
    notes: list[str] | None,
) -> bool:
    missing = index.missing_vectors(limit)
    if not missing:
        return False
    try:
        vectors = await embedder.embed([c.content for c in missing])
    except EmbeddingFailed as exc:
        if notes is not None:
            notes.append(f"memory: embeddings failed, used BM25 ({exc})")
        return False
    index.set_vectors([c.id for c in missing], vectors)
    if index.width is not None and vectors.ndim == 2 and vectors.shape[1] == index.width:
        saved = [(c.id, c.content, v) for c, v in zip(missing, vectors, strict=True)]
        save_memory_vectors(services.database, services.tasks, tenant_id, embedder.name, saved)
    return True


async def _embed_rest(
    services: IndexServices, embedder: Embedder, tenant_id: str, index: UserIndex
) -> None:
    try:
        while await _embed_batch(services, embedder, tenant_id, index, _BACKGROUND_BATCH, None):
            pass
    except Exception:  # retrieval goes on with BM25 for those; the next request retries
        logger.warning("memory vectors failed in the background", exc_info=True)
    finally:
        index.embedding_rest = False


async def _rebuild_lexical(index: UserIndex) -> None:
    ids, contents, tokens = index.lexical_snapshot()
    lexical = await asyncio.to_thread(LexicalIndex.from_tokens, tokens)
    index.install_lexical(ids, contents, lexical)


def _rebuild_lexical_later(tasks: Tasks, index: UserIndex) -> None:
    """A new BM25 snapshot off the request path (one at a time per index)."""
    if index.rebuilding:
        return
    index.rebuilding = True

    async def rebuild() -> None:
        try:
            while index.lexical_stale:  # changes that came during a build: once more
                await asyncio.sleep(_REBUILD_DELAY_S)
                await _rebuild_lexical(index)
        except Exception:
            logger.warning("rebuilding a BM25 index failed", exc_info=True)
        finally:
            index.rebuilding = False

    spawn(tasks, rebuild())


async def ensure_lexical(index: UserIndex, query: str) -> None:
    """Before scoring ``query``: a new BM25 snapshot if the query shares a term with a memory
    the current one lacks (its BM25 would be 0 otherwise)."""
    if index.needs_lexical(query):
        await _rebuild_lexical(index)


def refresh_soon(services: IndexServices, tenant_id: str, user: str) -> None:
    """After this process stored memories of ``user``: bring their cached index (if any) up
    to date and its BM25 snapshot rebuilt in the background, so the next query finds it ready."""
    if services.indexes.cached_entry((tenant_id, user)) is None:
        return

    async def refresh() -> None:
        try:
            async with services.database.reading() as session:
                await user_index(services, session, tenant_id, user)
        except Exception:
            logger.warning("refreshing a memory index failed", exc_info=True)

    spawn(services.tasks, refresh())
