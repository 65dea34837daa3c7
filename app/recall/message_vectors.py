"""Message vectors stored with their rows, computed off the request path.

Messages keep theirs in ``message_vectors`` (float32 blobs): ``schedule_message_vectors``
(backlog.py) embeds a conversation's stored user and assistant messages that have none yet,
after the turn is stored, at a bounded rate; search.py computes the few just cut lazily and
saves them the same way. Tool results are embedded only where recall may search them: those
the cache-aware fit has cleared (below ``conversations.cache_cleared_sequence``, the
deployment's excluded tools never), from their first ``TOOL_EMBED_MAX_CHARS`` characters
(MiniLM reads 256 word pieces).

A failure here is logged and forgotten: the vectors are computed again when next needed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import ColumnElement, Insert, Row, and_, delete, or_, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.lazy_module import lazy_module
from app.db.models import Message, MessageVector
from app.db.repository import message_scope
from app.db.upsert import dialect_insert
from app.embedders.embedder import Embedder, encode_vector
from app.recall.services import RecallServices
from app.tokens.counter import text_of
from app.wire.chat import AssistantContent

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = [
    "EMBED_MAX_CHARS",
    "TOOL_EMBED_MAX_CHARS",
    "MissingMessage",
    "MissingQuery",
    "VectorOwner",
    "embed_messages",
    "embedded_text",
    "excluded_tool_results",
    "missing_messages",
    "save_message_vectors",
    "tool_names",
    "worth_embedding",
]

logger = logging.getLogger(__name__)

EMBED_MAX_CHARS = 8000
# A tool result's vector is computed from its head: the embedded model reads 256 word pieces
# (about 1,000 characters of prose, fewer of code or JSON), so more would only cost tokenizing.
TOOL_EMBED_MAX_CHARS = 2000
_RECALLED_ROLES = ("user", "assistant")
_CALL_LOOKBACK = 256  # how far before its result a tool call is looked for


@dataclass(frozen=True, slots=True)
class MissingMessage:
    id: int
    sequence_number: int
    turn_number: int
    role: str
    text: str
    created_at: datetime
    tool_call_id: str | None = None
    stale: bool = False  # it has a vector of another embedder, to be replaced


@dataclass(frozen=True, slots=True)
class MissingQuery:
    """Which messages without a vector ``missing_messages`` reads (see there)."""

    before_sequence: int | None = None
    tools_before: int = 0
    tool_sequences: Sequence[int] | None = None
    limit: int = 4096
    newest_first: bool = False


@dataclass(frozen=True, slots=True)
class VectorOwner:
    """Whose message vectors: the conversation, its user (cross-session recall reads them by
    user), and the embedder that computed them."""

    tenant_id: str
    conversation_id: str
    user: str | None
    model: str


async def missing_messages(
    session: AsyncSession,
    tenant_id: str,
    conversation_id: str,
    model: str,
    query: MissingQuery = MissingQuery(),
) -> list[MissingMessage]:
    """The conversation's user/assistant messages with no vector of ``model`` yet (a vector of
    another embedder, from before the deployment changed it, counts as none), and its tool
    results before ``tools_before`` (the cleared ones). ``tool_sequences``: only these tool
    results, and no other message. In sequence order; ``newest_first``: the newest ``limit``
    (an index walk back from the end that stops there, whatever the history's length)."""
    tool_sequences, tools_before = query.tool_sequences, query.tools_before
    newest_first, before_sequence = query.newest_first, query.before_sequence
    if tool_sequences is not None:
        roles: ColumnElement[bool] = (Message.role == "tool") & Message.sequence_number.in_(
            list(tool_sequences)
        )
    else:
        roles = Message.role.in_(_RECALLED_ROLES)
        if tools_before > 0:
            cleared = and_(Message.role == "tool", Message.sequence_number < tools_before)
            roles = or_(roles, cleared)
    statement = (
        select(
            Message.id,
            Message.sequence_number,
            Message.turn_number,
            Message.role,
            Message.content,
            Message.created_at,
            Message.tool_call_id,
            MessageVector.id,
        )
        .outerjoin(MessageVector, MessageVector.message_id == Message.id)
        .where(
            Message.conversation_id == conversation_id,
            message_scope.tenant_clause(tenant_id),
            roles,
            or_(
                MessageVector.id.is_(None),
                MessageVector.embedding_model.is_not(None)
                & (MessageVector.embedding_model != model),
            ),
        )
        .order_by(Message.sequence_number.desc() if newest_first else Message.sequence_number)
        .limit(query.limit)
    )
    if before_sequence is not None:
        statement = statement.where(Message.sequence_number < before_sequence)
    rows = list((await session.execute(statement)).all())
    if newest_first:
        rows.reverse()
    return [_missing(row) for row in rows]


# id, sequence, turn, role, content, created_at, tool_call_id, the vector's id (outer join)
# (the vector's id is None where the join found none, whatever its column's type says)
_MissingRow = Row[int, int, int, str, AssistantContent, datetime, str | None, int]


def _missing(row: _MissingRow) -> MissingMessage:
    message_id, sequence, turn, role, content, created_at, call_id, vector_id = row
    text = text_of(content).strip()
    stale = vector_id is not None
    return MissingMessage(message_id, sequence, turn, role, text, created_at, call_id, stale)


async def tool_names(
    session: AsyncSession, tenant_id: str, conversation_id: str, sequences: Sequence[int]
) -> dict[str, str]:
    """call id -> tool name, from the assistant messages that may have called the results at
    ``sequences`` (a call comes shortly before its result)."""
    if not sequences:
        return {}
    statement = select(Message.tool_calls).where(
        Message.conversation_id == conversation_id,
        message_scope.tenant_clause(tenant_id),
        Message.role == "assistant",
        Message.sequence_number.between(min(sequences) - _CALL_LOOKBACK, max(sequences)),
    )
    names: dict[str, str] = {}
    for (calls,) in (await session.execute(statement)).all():
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                function = call.get("function") or {}
                names[str(call.get("id"))] = str(function.get("name") or "tool")
    return names


async def excluded_tool_results(
    session: AsyncSession,
    tenant_id: str,
    conversation_id: str,
    messages: Sequence[MissingMessage],
    exclude: frozenset[str],
) -> set[int]:
    """The ids of the results in ``messages`` of tools the deployment never clears: they are
    stored without a vector."""
    tools = [m for m in messages if m.role == "tool"]
    if not exclude or not tools:
        return set()
    names = await tool_names(
        session, tenant_id, conversation_id, [m.sequence_number for m in tools]
    )
    return {m.id for m in tools if names.get(str(m.tool_call_id)) in exclude}


def worth_embedding(role: str, content: object) -> bool:
    """Whether a new message gets a vector as soon as it is stored (a user's or assistant's
    text; a tool result only once cleared, an assistant's tool calls never)."""
    return role in _RECALLED_ROLES and bool(text_of(content).strip())


def embedded_text(message: MissingMessage) -> str:
    """What of a message is embedded: a tool result's head, another message's first 8,000
    characters."""
    return message.text[: TOOL_EMBED_MAX_CHARS if message.role == "tool" else EMBED_MAX_CHARS]


async def embed_messages(
    embedder: Embedder, messages: Sequence[MissingMessage], skip: Set[int] = frozenset()
) -> list[np.ndarray | None]:
    """One vector per message (None: no text, or its id in ``skip``)."""
    wanted = [bool(m.text) and m.id not in skip for m in messages]
    texts = [embedded_text(m) for m, want in zip(messages, wanted, strict=True) if want]
    vectors = await embedder.embed(texts) if texts else np.zeros((0, 0), dtype=np.float32)
    result: list[np.ndarray | None] = []
    position = 0
    for want in wanted:
        if want:
            result.append(vectors[position])
            position += 1
        else:
            result.append(None)
    return result


async def save_message_vectors(
    services: RecallServices,
    owner: VectorOwner,
    messages: Sequence[MissingMessage],
    vectors: Sequence[np.ndarray | None],
) -> None:
    tenant_id, conversation_id, model = owner.tenant_id, owner.conversation_id, owner.model
    rows = [
        {
            "message_id": message.id,
            "conversation_id": conversation_id,
            "tenant_id": tenant_id,
            "user_id": owner.user,
            "sequence_number": message.sequence_number,
            "turn_number": message.turn_number,
            "role": message.role,
            "embedding": encode_vector(vector) if vector is not None else None,
            "embedding_model": model if vector is not None else None,
            "created_at": message.created_at,
        }
        for message, vector in zip(messages, vectors, strict=True)
    ]
    if not rows:
        return
    try:
        async with services.database.writing() as session:
            stale = [m.id for m in messages if m.stale]  # vectors of a previous embedder
            if stale:
                await session.execute(
                    delete(MessageVector).where(
                        MessageVector.message_id.in_(stale),
                        MessageVector.embedding_model.is_not(None),
                        MessageVector.embedding_model != model,
                    )
                )
            # Another task (this process's previous turn, or another worker) may have stored
            # some of them first: those are skipped, the rest still land.
            await session.execute(_insert_ignoring_duplicates(session), rows)
    except SQLAlchemyError:  # recall degrades (the next turn retries them), never the request
        logger.warning("message vectors not stored", exc_info=True)
        return
    services.cache.stored(
        (tenant_id, conversation_id, model),
        [(m.id, m.sequence_number, v) for m, v in zip(messages, vectors, strict=True)],
    )


def _insert_ignoring_duplicates(session: AsyncSession) -> Insert:
    insert = dialect_insert(session.get_bind().dialect.name, MessageVector)
    return insert.on_conflict_do_nothing(index_elements=["message_id"])
