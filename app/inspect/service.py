"""Build the inspector's views: conversations, one conversation's timeline, memories."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.database import Database
from app.core.errors import NotFound
from app.inspect.repository import inspect_repository as repository
from app.inspect.views import (
    ConversationRow,
    MessageView,
    RequestView,
    TimelineEntry,
    conversation_row,
    message_view,
    request_view,
    scale_bars,
)

__all__ = ["InspectService", "MemoryUser", "Timeline"]


@dataclass(slots=True)
class Timeline:
    conversation: ConversationRow
    entries: list[TimelineEntry]
    requests: list[RequestView]
    summaries: list[dict[str, object]] | None  # rows as stored; None: compaction is not installed
    hidden_messages: int = 0  # older messages not shown (``last`` was given)


@dataclass(slots=True)
class MemoryUser:
    tenant_id: str
    user_id: str
    memories: int


def _entries(messages: list[MessageView], requests: list[RequestView]) -> list[TimelineEntry]:
    """Group messages by the request that stored them, each group followed by its request."""
    by_id = {request.id: request for request in requests}
    entries: list[TimelineEntry] = []
    for message in messages:
        last = entries[-1] if entries else None
        if (
            last is not None
            and last.messages
            and last.messages[-1].request_id == message.request_id
        ):
            last.messages.append(message)
        else:
            entries.append(TimelineEntry([message], by_id.get(message.request_id or "")))
    shown = {entry.request.id for entry in entries if entry.request is not None}
    # Requests that stored nothing (errors) still belong to the timeline, in time order.
    for request in requests:
        if request.id not in shown:
            entries.append(TimelineEntry([], request))
    return entries


class InspectService:
    """``tenant_id=None`` is the operator's view across tenants."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def conversations(
        self, tenant_id: str | None, *, limit: int = 50, offset: int = 0
    ) -> list[ConversationRow]:
        async with self._database.reading() as session:
            rows = await repository.conversations(session, tenant_id, limit=limit, offset=offset)
            totals = await repository.request_totals(session, [row.id for row in rows])
        return [conversation_row(row, *totals.get(row.id, (0, 0.0))) for row in rows]

    async def timeline(
        self, tenant_id: str | None, conversation_id: str, *, last: int | None = None
    ) -> Timeline:
        """The whole timeline, or its ``last`` messages and the requests since the first of them."""
        async with self._database.reading() as session:
            conversation = await repository.conversation(session, tenant_id, conversation_id)
            if conversation is None:
                raise NotFound(f"No conversation with id '{conversation_id}'.", param="id")
            start = max(conversation.message_count - last, 0) if last is not None else 0
            rows = await repository.messages(session, conversation.id, from_sequence=start)
            since = rows[0].created_at if start > 0 and rows else None
            logs = await repository.requests(session, conversation.id, since=since)
            totals = (await repository.request_totals(session, [conversation.id])).get(
                conversation.id, (0, 0.0)
            )
            summaries = await repository.summaries(session, conversation.id)
        messages = [message_view(row) for row in rows]
        requests = [request_view(row) for row in logs]
        scale_bars(requests)
        return Timeline(
            conversation=conversation_row(conversation, *totals),
            entries=_entries(messages, requests),
            requests=requests,
            summaries=summaries,
            hidden_messages=start,
        )

    async def memory_users(self, tenant_id: str | None) -> list[MemoryUser] | None:
        async with self._database.reading() as session:
            rows = await repository.memory_users(session, tenant_id)
        return None if rows is None else [MemoryUser(*row) for row in rows]

    async def memories(self, tenant_id: str | None, user_id: str) -> list[dict[str, object]] | None:
        async with self._database.reading() as session:
            return await repository.memories(session, tenant_id, user_id)
