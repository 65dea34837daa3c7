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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.context.tokens import text_of
from app.core.delimiters import escape_delimiters
from app.core.state import AppState
from app.db.models import Message
from app.db.repository import message_scope
from app.memories.embedder import Embedder, decode_vector
from app.memories.recall_vectors import (
    CROSS_SESSION_FETCH,
    Hits,
    VectorCache,
    VectorSet,
    conversation_vectors,
    other_conversations,
)
from app.memories.vectors import (
    MissingMessage,
    embed_messages,
    excluded_tool_results,
    missing_messages,
    save_message_vectors,
    tool_names,
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
# Messages a request embeds itself when the background is behind: the few just cut (more is a
# backlog, embedded after the turn at a bounded rate).
INLINE_EMBED = 8


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
    tool_call_id: str | None = None
    tool_name: str | None = None

    def report(self) -> dict[str, Any]:
        found = {
            "sequence_number": self.sequence_number,
            "turn_number": self.turn_number,
            "conversation_id": self.conversation_id,
            "similarity": round(self.similarity, 4),
            "role": self.role,
        }
        if self.role == "tool":
            found |= {"tool_call_id": self.tool_call_id, "tool_name": self.tool_name}
        return found


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
    tools: ToolScope | None = None,
    notes: list[str] | None = None,
) -> list[Recalled]:
    """The stored messages most similar to ``query``: this conversation's messages in
    ``[first_sequence, before_sequence)`` and the cleared tool results ``tools`` names, and
    the user's other conversations when this one has few vectors; at or above
    ``min_similarity``, best first. ``notes``: what the request should be told (recall
    searched a backlog only in part)."""
    tools = tools or ToolScope()
    embedding = asyncio.ensure_future(embedder.embed([query]))  # on its thread meanwhile
    try:
        vectors = await conversation_vectors(
            cache, session, tenant_id, conversation_id, embedder.name, through=before_sequence - 1
        )
    finally:
        query_vector = (await embedding)[0]
    hits = Hits()
    if vectors.matrix is not None:
        window = (vectors.sequences >= first_sequence) & (vectors.sequences < before_sequence)
        if tools.placeholders:
            window |= np.isin(vectors.sequences, np.fromiter(tools.placeholders, np.int64))
        rows = np.flatnonzero(window)
        if rows.size:
            hits.add(vectors.message_ids[rows], vectors.matrix[rows] @ query_vector, min_similarity)
    missing: list[MissingMessage] = []
    behind, owner = False, (tenant_id, conversation_id)
    if vectors.max_sequence < before_sequence - 1:  # the background has not caught up (yet)
        # The few just cut are embedded now; a backlog (a long history imported at once) is
        # the background's, at its bounded rate: this request searches what is embedded.
        newest = await missing_messages(
            session,
            tenant_id,
            conversation_id,
            embedder.name,
            before_sequence=before_sequence,
            tools_before=tools.cleared_before,
            limit=INLINE_EMBED + 1,
            newest_first=True,
        )
        cut = [m for m in newest if m.sequence_number >= first_sequence]
        if len(newest) <= INLINE_EMBED:
            missing = cut
        else:
            behind = True
    if notes is not None and (behind or state.memory.vector_backlog.behind(*owner)):
        notes.append(
            f"message recall: searched the {vectors.size} messages embedded so far; "
            "the rest of this conversation is being embedded in the background"
        )
    absent = tools.placeholders - {int(s) for s in vectors.sequences}
    absent -= {m.sequence_number for m in missing}
    if absent:  # cleared by this request or the previous ones: the newest few now
        found = await missing_messages(
            session, tenant_id, conversation_id, embedder.name, tool_sequences=sorted(absent)
        )
        missing += found[-tools.lazy_limit :]
    if missing:
        excluded = await excluded_tool_results(
            session, tenant_id, conversation_id, missing, tools.exclude
        )
        await _lazy(
            state,
            embedder,
            (tenant_id, conversation_id, user),
            missing,
            excluded,
            query_vector,
            min_similarity,
            hits,
        )
    if user and vectors.size + len(missing) < cross_session_below:
        others = await other_conversations(session, tenant_id, user, conversation_id, embedder.name)
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
    found_rows = await _load(session, tenant_id, best, max_chars, tools.max_chars or max_chars)
    seen = {" ".join(query.lower().split())}
    unique: list[Recalled] = []
    for item in found_rows:
        key = " ".join(item.text.lower().split())
        if item.role == "tool" and item.similarity < tools.min_similarity:
            continue
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique[:top_k]


async def _lazy(
    state: AppState,
    embedder: Embedder,
    where: tuple[str, str, str | None],
    missing: list[MissingMessage],
    excluded: set[int],
    query_vector: np.ndarray,
    min_similarity: float,
    hits: Hits,
) -> None:
    """Vectors the background has not stored yet: computed now, saved in the background."""
    tenant_id, conversation_id, user = where
    vectors = await embed_messages(embedder, missing, excluded)
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


def _stamp(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _item(item: Recalled, conversation_id: str) -> str:
    """One recalled message: its header, then its text escaped. A message is on one line; a
    tool result's lines are indented, so no quoted line can start an item or a role turn."""
    where = "" if item.conversation_id == conversation_id else "another conversation, "
    text = escape_delimiters(item.text)
    if item.role != "tool":
        return f"- ({where}turn {item.turn_number}, {_stamp(item.created_at)}, {item.role}) {text}"
    name, call = (
        escape_delimiters(" ".join((v or "?").split())) for v in (item.tool_name, item.tool_call_id)
    )
    head = (
        f"- (turn {item.turn_number}, {_stamp(item.created_at)}, result of tool '{name}', "
        f"call {call}, cleared from this prompt):"
    )
    return "\n".join([head, *("  " + line for line in text.split("\n"))])


def render_recalled(recalled: Sequence[Recalled], conversation_id: str) -> str:
    return "\n".join(
        [RECALL_HEADER, *(_item(item, conversation_id) for item in recalled), RECALL_FOOTER]
    )
