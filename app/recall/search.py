"""Message recall (seed 004): when the history sent is cut, bring back the stored messages most
similar to the newest user message; and the tool results the cache-aware fit sends as
placeholders (app/context/cache_fit.py), in full, when the newest user message needs them.

When a conversation has been compacted or its history trimmed, ``plan_recall`` reserves up to
``recall_token_cap`` tokens of the budget before the history is fitted. After assembly,
``recall_for_turn`` embeds the newest user message, compares it with the vectors of the
conversation's messages that did not make it into the prompt, keeps those at or above the
embedder's minimum similarity (top ``recall_top_k``), and renders them as one block marked as
recalled, each with its turn, time and role (a tool result: its tool name and call id). Every
quoted text has contextgate's delimiters escaped (app/core/delimiters.py): it can neither close
the block nor forge another. When the conversation has fewer than
``recall_cross_session_below`` vectors, the same user's other conversations (same tenant, same
``user``; never another) are searched too, their 200 newest vectors.

The block goes next to the newest user message (per-turn context), never into earlier messages,
so the cached prefix of the prompt is untouched. Nothing here fails a request: an error is a
note in ``context_utilization`` and the turn goes on without recall.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.lazy_module import lazy_module
from app.core.tasks import spawn
from app.db.models import Message
from app.db.repository import message_scope
from app.embedders.embedder import Embedder, decode_vector
from app.recall.message_vectors import (
    MissingMessage,
    MissingQuery,
    VectorOwner,
    embed_messages,
    excluded_tool_results,
    missing_messages,
    save_message_vectors,
    tool_names,
)
from app.recall.render import Recalled
from app.recall.services import RecallServices
from app.recall.vector_sets import Hits, VectorSet, conversation_vectors, other_conversations
from app.tokens.counter import text_of

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = ["RecallQuery", "ToolScope", "search"]

logger = logging.getLogger(__name__)

# Messages a request embeds itself when the background is behind: the few just cut (more is a
# backlog, embedded after the turn at a bounded rate).
INLINE_EMBED = 8


@dataclass(frozen=True, slots=True)
class ToolScope:
    """The tool results recall may bring back: ``placeholders``, those this prompt sends
    cleared; ``cleared_before``, the stored clearing boundary (cleared results that were cut
    since have vectors too); ``exclude``, tools the deployment never clears."""

    placeholders: frozenset[int] = frozenset()
    cleared_before: int = 0
    exclude: frozenset[str] = frozenset()
    max_chars: int = 0  # a recalled result's text, before the room is fitted
    min_similarity: float = 0.0  # a tool result's bar (above the messages' own)
    lazy_limit: int = 4  # results a request embeds itself (the background does the rest)


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """What to search: ``query`` among this conversation's messages in ``[first_sequence,
    before_sequence)`` and the cleared tool results ``tools`` names, and among the user's other
    conversations when this one has fewer than ``cross_session_below`` vectors; the ``top_k``
    at or above ``min_similarity``, each text clipped to ``max_chars``."""

    tenant_id: str
    user: str | None
    conversation_id: str
    query: str
    first_sequence: int
    before_sequence: int
    top_k: int
    min_similarity: float
    cross_session_below: int
    max_chars: int
    tools: ToolScope = ToolScope()


async def search(
    services: RecallServices,
    embedder: Embedder,
    session: AsyncSession,
    wanted: RecallQuery,
    notes: list[str] | None = None,
) -> list[Recalled]:
    """The stored messages most similar to ``wanted.query``, best first. ``notes``: what the
    request should be told (recall searched a backlog only in part)."""
    embedding = asyncio.ensure_future(embedder.embed([wanted.query]))  # on its thread meanwhile
    try:
        vectors = await conversation_vectors(
            services.cache,
            session,
            wanted.tenant_id,
            wanted.conversation_id,
            embedder.name,
            through=wanted.before_sequence - 1,
        )
    finally:
        query_vector = (await embedding)[0]
    run = _Search(services, embedder, session, wanted, query_vector)
    run.stored(vectors)
    missing, behind = await run.just_cut(vectors)
    owner = (wanted.tenant_id, wanted.conversation_id)
    if notes is not None and (behind or services.backlog.behind(*owner)):
        notes.append(
            f"message recall: searched the {vectors.size} messages embedded so far; "
            "the rest of this conversation is being embedded in the background"
        )
    missing += await run.cleared(vectors, missing)
    if missing:
        await run.lazy(missing)
    if wanted.user and vectors.size + len(missing) < wanted.cross_session_below:
        await run.other_conversations(wanted.user)
    return await run.results()


class _Search:
    """One search's steps, adding to its ``hits``: the vectors stored, the few not embedded
    yet (computed now), the user's other conversations; then the rows of the best."""

    def __init__(
        self,
        services: RecallServices,
        embedder: Embedder,
        session: AsyncSession,
        wanted: RecallQuery,
        query_vector: np.ndarray,
    ) -> None:
        self.services = services
        self.embedder = embedder
        self.session = session
        self.wanted = wanted
        self.query_vector = query_vector
        self.hits = Hits()

    def stored(self, vectors: VectorSet) -> None:
        """This conversation's stored vectors in the window, and the placeholders'."""
        if vectors.matrix is None:
            return
        wanted, tools = self.wanted, self.wanted.tools
        sequences = vectors.sequences
        window = (sequences >= wanted.first_sequence) & (sequences < wanted.before_sequence)
        if tools.placeholders:
            window |= np.isin(sequences, np.fromiter(tools.placeholders, np.int64))
        rows = np.flatnonzero(window)
        if rows.size:
            # The whole matrix times the query, then the window's rows: taking the rows first
            # copied them (15 MB for 10,000 stored messages, ~3.5 ms a request).
            cosine = (vectors.matrix @ self.query_vector)[rows]
            self.hits.add(vectors.message_ids[rows], cosine, wanted.min_similarity)

    async def just_cut(self, vectors: VectorSet) -> tuple[list[MissingMessage], bool]:
        """The messages just cut that have no vector yet, when they are few; (those, whether
        the background is behind with more)."""
        wanted = self.wanted
        if vectors.max_sequence >= wanted.before_sequence - 1:
            return [], False
        # The background has not caught up (yet). The few just cut are embedded now; a backlog
        # (a long history imported at once) is the background's, at its bounded rate: this
        # request searches what is embedded.
        newest = await missing_messages(
            self.session,
            wanted.tenant_id,
            wanted.conversation_id,
            self.embedder.name,
            MissingQuery(
                before_sequence=wanted.before_sequence,
                tools_before=wanted.tools.cleared_before,
                limit=INLINE_EMBED + 1,
                newest_first=True,
            ),
        )
        if len(newest) > INLINE_EMBED:
            return [], True
        return [m for m in newest if m.sequence_number >= wanted.first_sequence], False

    async def cleared(
        self, vectors: VectorSet, missing: list[MissingMessage]
    ) -> list[MissingMessage]:
        """Placeholders without a vector (cleared by this request or the previous ones): the
        newest few, embedded now."""
        tools = self.wanted.tools
        if not tools.placeholders:
            return []
        placeholders = np.fromiter(tools.placeholders, np.int64, len(tools.placeholders))
        absent = set(placeholders[~np.isin(placeholders, vectors.sequences)].tolist())
        absent -= {m.sequence_number for m in missing}
        if not absent:
            return []
        found = await missing_messages(
            self.session,
            self.wanted.tenant_id,
            self.wanted.conversation_id,
            self.embedder.name,
            MissingQuery(tool_sequences=sorted(absent)),
        )
        return found[-tools.lazy_limit :]

    async def lazy(self, missing: list[MissingMessage]) -> None:
        """Vectors the background has not stored yet: computed now, saved in the background."""
        wanted, embedder = self.wanted, self.embedder
        excluded = await excluded_tool_results(
            self.session, wanted.tenant_id, wanted.conversation_id, missing, wanted.tools.exclude
        )
        vectors = await embed_messages(embedder, missing, excluded)
        with_vectors = [(m, v) for m, v in zip(missing, vectors, strict=True) if v is not None]
        if with_vectors:
            ids = np.asarray([m.id for m, _ in with_vectors], dtype=np.int64)
            matrix = np.stack([v for _, v in with_vectors])
            self.hits.add(ids, matrix @ self.query_vector, wanted.min_similarity)
        owner = VectorOwner(wanted.tenant_id, wanted.conversation_id, wanted.user, embedder.name)
        work = save_message_vectors(self.services, owner, missing, vectors)
        spawn(self.services.tasks, work)

    async def other_conversations(self, user: str) -> None:
        """The newest vectors of the user's other conversations (same tenant)."""
        wanted = self.wanted
        others = await other_conversations(
            self.session, wanted.tenant_id, user, wanted.conversation_id, self.embedder.name
        )
        others = [r for r in others if r.embedding is not None]
        if not others:
            return
        matrix = np.stack([decode_vector(cast(bytes, r.embedding)) for r in others])  # not None
        if matrix.shape[1] == self.query_vector.shape[0]:
            ids = np.asarray([r.message_id for r in others], dtype=np.int64)
            self.hits.add(ids, matrix @ self.query_vector, wanted.min_similarity)

    async def results(self) -> list[Recalled]:
        """The best hits loaded, copies of the query and repeated texts dropped."""
        wanted, tools = self.wanted, self.wanted.tools
        # A few extra: copies of the query itself and repeated texts are dropped after loading.
        best = self.hits.best(wanted.top_k + 4)
        if not best:
            return []
        max_chars = wanted.max_chars
        rows = await _load(
            self.session, wanted.tenant_id, best, max_chars, tools.max_chars or max_chars
        )
        seen = {" ".join(wanted.query.lower().split())}
        unique: list[Recalled] = []
        for item in rows:
            key = " ".join(item.text.lower().split())
            if item.role == "tool" and item.similarity < tools.min_similarity:
                continue
            if key not in seen:
                seen.add(key)
                unique.append(item)
        return unique[: wanted.top_k]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


async def _load(
    session: AsyncSession,
    tenant_id: str,
    best: list[tuple[int, float]],
    max_chars: int,
    tool_max_chars: int,
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
        Message.tool_call_id,
    ).where(
        Message.id.in_(list(similarity)),
        message_scope.tenant_clause(tenant_id),
        Message.status != "deleted",  # deleted through the Conversations API: never recalled
    )
    rows = (await session.execute(statement)).all()
    names: dict[str, str] = {}
    tool_rows = [r for r in rows if r.role == "tool"]
    if tool_rows:  # only this conversation's tool results are searched
        names = await tool_names(
            session,
            tenant_id,
            tool_rows[0].conversation_id,
            [r.sequence_number for r in tool_rows],
        )
    found = []
    for row in rows:
        tool = row.role == "tool"
        if tool:  # its lines kept (code, tables), trailing space dropped
            text = "\n".join(line.rstrip() for line in text_of(row.content).strip().splitlines())
        else:
            text = " ".join(text_of(row.content).split())
        found.append(
            Recalled(
                row.id,
                row.conversation_id,
                row.sequence_number,
                row.turn_number,
                row.role,
                similarity[row.id],
                _clip(text, tool_max_chars if tool else max_chars),
                row.created_at,
                (row.tool_call_id or "?") if tool else None,
                names.get(str(row.tool_call_id), "tool") if tool else None,
            )
        )
    found.sort(key=lambda r: -r.similarity)
    return found
