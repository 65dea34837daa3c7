"""Message recall (seed 004): when the history sent is cut, bring back the stored messages most
similar to the newest user message.

When a conversation has been compacted or its history trimmed, ``plan_recall`` reserves up to
``recall_token_cap`` tokens of the budget before the history is fitted. After assembly,
``recall_for_turn`` embeds the newest user message, compares it with the vectors of the
conversation's messages that did not make it into the prompt, keeps those at or above the
embedder's minimum similarity (top ``recall_top_k``), and renders them as one block marked as
recalled, each with its turn, time and role. When the conversation has fewer than
``recall_cross_session_below`` vectors, the same user's other conversations (same tenant, same
``user``; never another) are searched too, their 200 newest vectors.

The block goes next to the newest user message (per-turn context), never into earlier messages,
so the cached prefix of the prompt is untouched. Nothing here fails a request: an error is a
note in ``context_utilization`` and the turn goes on without recall.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.context.tokens import text_of
from app.core.state import AppState
from app.db.models import Message, MessageVector
from app.memories.embedder import Embedder, decode_vector
from app.memories.vectors import (
    MissingMessage,
    embed_messages,
    missing_messages,
    save_message_vectors,
)

__all__ = [
    "CROSS_SESSION_FETCH",
    "RECALL_HEADER",
    "Recalled",
    "VectorCache",
    "VectorSet",
    "render_recalled",
    "search",
]

logger = logging.getLogger(__name__)

RECALL_HEADER = (
    "[RECALLED: earlier messages no longer in this conversation's history, most similar first]"
)
RECALL_FOOTER = "[/RECALLED]"
CROSS_SESSION_FETCH = 200  # the seed's vector fetch limit for other conversations
_CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class Recalled:
    message_id: int
    conversation_id: str
    sequence_number: int
    turn_number: int
    role: str
    similarity: float
    text: str
    created_at: datetime

    def report(self) -> dict[str, Any]:
        return {
            "sequence_number": self.sequence_number,
            "turn_number": self.turn_number,
            "conversation_id": self.conversation_id,
            "similarity": round(self.similarity, 4),
        }


@dataclass(slots=True)
class VectorSet:
    """A conversation's message vectors for one embedder, loaded incrementally by row id."""

    model: str
    last_id: int = 0
    message_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sequences: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    matrix: np.ndarray | None = None

    max_sequence: int = -1  # of every row seen, with or without a vector

    @property
    def size(self) -> int:
        return int(self.message_ids.shape[0])

    def extend(self, rows: Sequence[Any]) -> None:
        usable = [r for r in rows if r.embedding is not None and r.embedding_model == self.model]
        if rows:
            self.last_id = max(self.last_id, max(int(r.id) for r in rows))
            self.max_sequence = max(self.max_sequence, max(int(r.sequence_number) for r in rows))
        if not usable:
            return
        vectors = np.stack([decode_vector(r.embedding) for r in usable])
        if self.matrix is not None and self.matrix.shape[1] != vectors.shape[1]:
            return
        self.matrix = vectors if self.matrix is None else np.vstack([self.matrix, vectors])
        self.message_ids = np.concatenate(
            [self.message_ids, np.asarray([r.message_id for r in usable], dtype=np.int64)]
        )
        self.sequences = np.concatenate(
            [self.sequences, np.asarray([r.sequence_number for r in usable], dtype=np.int64)]
        )


class VectorCache:
    """(tenant, conversation, embedder) -> VectorSet, least recently used out."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._sets: OrderedDict[tuple[str, str, str], VectorSet] = OrderedDict()

    def get(self, key: tuple[str, str, str]) -> VectorSet:
        found = self._sets.get(key)
        if found is None:
            found = VectorSet(model=key[2])
            self._sets[key] = found
        self._sets.move_to_end(key)
        while len(self._sets) > self._size:
            self._sets.popitem(last=False)
        return found


_VECTOR_COLUMNS = (
    MessageVector.id,
    MessageVector.message_id,
    MessageVector.sequence_number,
    MessageVector.conversation_id,
    MessageVector.embedding,
    MessageVector.embedding_model,
)


async def _conversation_vectors(
    cache: VectorCache,
    session: AsyncSession,
    tenant_id: str,
    conversation_id: str,
    model: str,
) -> VectorSet:
    vectors = cache.get((tenant_id, conversation_id, model))
    statement = (
        select(*_VECTOR_COLUMNS)
        .where(
            MessageVector.conversation_id == conversation_id,
            MessageVector.tenant_id == tenant_id,
            MessageVector.id > vectors.last_id,
        )
        .order_by(MessageVector.id)
    )
    vectors.extend((await session.execute(statement)).all())
    return vectors


async def _other_conversations(
    session: AsyncSession, tenant_id: str, user: str, conversation_id: str, model: str
) -> list[Any]:
    statement = (
        select(*_VECTOR_COLUMNS)
        .where(
            MessageVector.tenant_id == tenant_id,
            MessageVector.user_id == user,
            MessageVector.conversation_id != conversation_id,
            MessageVector.embedding_model == model,
            MessageVector.embedding.is_not(None),
        )
        .order_by(MessageVector.id.desc())
        .limit(CROSS_SESSION_FETCH)
    )
    return list((await session.execute(statement)).all())


@dataclass(slots=True)
class _Hits:
    message_ids: list[int] = field(default_factory=list)
    similarities: list[float] = field(default_factory=list)

    def add(self, ids: np.ndarray, cosine: np.ndarray, minimum: float) -> None:
        keep = np.flatnonzero(cosine >= minimum)
        self.message_ids.extend(int(i) for i in ids[keep])
        self.similarities.extend(float(c) for c in cosine[keep])

    def best(self, top_k: int) -> list[tuple[int, float]]:
        pairs = sorted(zip(self.message_ids, self.similarities, strict=True), key=lambda p: -p[1])
        seen: set[int] = set()
        chosen: list[tuple[int, float]] = []
        for message_id, similarity in pairs:
            if message_id not in seen:
                seen.add(message_id)
                chosen.append((message_id, similarity))
            if len(chosen) >= top_k:
                break
        return chosen


async def search(
    state: AppState,
    embedder: Embedder,
    cache: VectorCache,
    session: AsyncSession,
    *,
    tenant_id: str,
    user: str | None,
    conversation_id: str,
    query: str,
    first_sequence: int,
    before_sequence: int,
    top_k: int,
    min_similarity: float,
    cross_session_below: int,
    max_chars: int,
) -> list[Recalled]:
    """The stored messages most similar to ``query``: this conversation's messages in
    ``[first_sequence, before_sequence)``, and the user's other conversations when this one
    has few vectors; at or above ``min_similarity``, best first."""
    embedding = asyncio.ensure_future(embedder.embed([query]))  # on its thread meanwhile
    try:
        vectors = await _conversation_vectors(
            cache, session, tenant_id, conversation_id, embedder.name
        )
    finally:
        query_vector = (await embedding)[0]
    hits = _Hits()
    if vectors.matrix is not None:
        window = (vectors.sequences >= first_sequence) & (vectors.sequences < before_sequence)
        rows = np.flatnonzero(window)
        if rows.size:
            hits.add(vectors.message_ids[rows], vectors.matrix[rows] @ query_vector, min_similarity)
    missing: list[MissingMessage] = []
    if vectors.max_sequence < before_sequence - 1:  # the background has not caught up (yet)
        missing = await missing_messages(
            session, tenant_id, conversation_id, embedder.name, before_sequence=before_sequence
        )
        # The newest ones (just cut) now, as many as a request may embed; the background
        # embeds the rest after this turn.
        cut = [m for m in missing if m.sequence_number >= first_sequence]
        missing = cut[-embedder.request_batch :]
    if missing:
        await _lazy(
            state,
            embedder,
            tenant_id,
            conversation_id,
            user,
            missing,
            query_vector,
            min_similarity,
            hits,
        )
    if user and vectors.size + len(missing) < cross_session_below:
        others = await _other_conversations(
            session, tenant_id, user, conversation_id, embedder.name
        )
        others = [r for r in others if r.embedding is not None]
        if others:
            matrix = np.stack([decode_vector(r.embedding) for r in others])
            if matrix.shape[1] == query_vector.shape[0]:
                ids = np.asarray([r.message_id for r in others], dtype=np.int64)
                hits.add(ids, matrix @ query_vector, min_similarity)
    # A few extra: copies of the query itself and repeated texts are dropped after loading.
    best = hits.best(top_k + 4)
    if not best:
        return []
    found = await _load(session, tenant_id, best, max_chars)
    seen = {" ".join(query.lower().split())}
    unique: list[Recalled] = []
    for item in found:
        key = " ".join(item.text.lower().split())
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique[:top_k]


async def _lazy(
    state: AppState,
    embedder: Embedder,
    tenant_id: str,
    conversation_id: str,
    user: str | None,
    missing: list[MissingMessage],
    query_vector: np.ndarray,
    min_similarity: float,
    hits: _Hits,
) -> None:
    """Vectors the background has not stored yet: computed now, saved in the background."""
    vectors = await embed_messages(embedder, missing)
    with_vectors = [(m, v) for m, v in zip(missing, vectors, strict=True) if v is not None]
    if with_vectors:
        ids = np.asarray([m.id for m, _ in with_vectors], dtype=np.int64)
        matrix = np.stack([v for _, v in with_vectors])
        hits.add(ids, matrix @ query_vector, min_similarity)
    task = asyncio.get_running_loop().create_task(
        save_message_vectors(
            state, tenant_id, conversation_id, user, embedder.name, missing, vectors
        )
    )
    state.background.add(task)
    task.add_done_callback(state.background.discard)


async def _load(
    session: AsyncSession, tenant_id: str, best: list[tuple[int, float]], max_chars: int
) -> list[Recalled]:
    similarity = dict(best)
    statement = select(
        Message.id,
        Message.conversation_id,
        Message.sequence_number,
        Message.turn_number,
        Message.role,
        Message.content,
        Message.created_at,
    ).where(Message.id.in_(list(similarity)), Message.tenant_id == tenant_id)
    found = []
    for row in (await session.execute(statement)).all():
        text = " ".join(text_of(row.content).split())
        if len(text) > max_chars:
            text = text[: max_chars - 1].rstrip() + "…"
        found.append(
            Recalled(
                row.id,
                row.conversation_id,
                row.sequence_number,
                row.turn_number,
                row.role,
                similarity[row.id],
                text,
                row.created_at,
            )
        )
    found.sort(key=lambda r: -r.similarity)
    return found


def _stamp(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def render_recalled(recalled: Sequence[Recalled], conversation_id: str) -> str:
    lines = [RECALL_HEADER]
    for item in recalled:
        where = "" if item.conversation_id == conversation_id else "another conversation, "
        lines.append(
            f"- ({where}turn {item.turn_number}, {_stamp(item.created_at)}, {item.role}) "
            f"{item.text}"
        )
    lines.append(RECALL_FOOTER)
    return "\n".join(lines)
