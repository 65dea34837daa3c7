"""Stored responses: where a new response starts (continue or branch), save, read, delete."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from typing import cast

from app.conversations.messages import ConversationMessage
from app.conversations.repository import conversation_repository
from app.conversations.service import conversation_service
from app.core.database import Database
from app.core.errors import NotFound
from app.db.models import ResponseRecord
from app.responses.objects import response_object
from app.responses.repository import response_repository as repository
from app.wire.chat import ChatMessage
from app.wire.json import JSONObject

__all__ = ["ResponseService", "StartPoint", "response_service"]

_RESENT = ("role", "content", "name", "tool_calls", "tool_call_id")
_REASONING = ("reasoning_content", "thinking_blocks")


@dataclass(slots=True)
class StartPoint:
    """Where a response with ``previous_response_id`` goes on from."""

    conversation_id: str | None = None  # continue this stored conversation
    at: int | None = None  # exactly after this many of its messages (else: branch)
    history: list[ChatMessage] = field(default_factory=list)  # store=false: sent as they are


def _not_found(response_id: str, param: str | None = None) -> NotFound:
    return NotFound(
        f"Response with id '{response_id}' not found.", param=param, code="response_not_found"
    )


class ResponseService:
    async def get(self, database: Database, tenant_id: str, response_id: str) -> ResponseRecord:
        async with database.reading() as session:
            record = await repository.get(session, tenant_id, response_id)
        if record is None:
            raise _not_found(response_id)
        return record

    async def start_from(
        self, database: Database, tenant_id: str, previous_id: str, *, store: bool
    ) -> StartPoint:
        """Continue the conversation at once when ``previous_id`` is its latest response; from
        an older one, branch: a fork holding the messages up to that response only."""
        async with database.reading() as session:
            record = await repository.get(session, tenant_id, previous_id)
            if record is None:
                raise _not_found(previous_id, "previous_response_id")
            conversation = await conversation_repository.get(
                session, tenant_id, record.conversation_id
            )
            if conversation is None:  # the conversation was deleted since
                raise _not_found(previous_id, "previous_response_id")
            if not store:
                messages = await conversation_service.messages(session, conversation)
                history = messages[: record.end_sequence]
                newest = max((i for i, m in enumerate(history) if m.role == "user"), default=-1)
                return StartPoint(history=[_resent(m, i == newest) for i, m in enumerate(history)])
            if conversation.message_count == record.end_sequence:
                return StartPoint(conversation_id=conversation.id, at=record.end_sequence)
        fork = await self.branch(database, tenant_id, record.conversation_id, record.end_sequence)
        return StartPoint(conversation_id=fork)

    async def branch(
        self, database: Database, tenant_id: str, conversation_id: str, upto: int
    ) -> str:
        """A new conversation holding the first ``upto`` messages of this one."""
        async with database.writing() as session:
            return await conversation_service.fork(session, tenant_id, conversation_id, upto)

    async def mark_incomplete(
        self, database: Database, tenant_id: str, response_id: str, reason: str
    ) -> None:
        async with database.writing() as session:
            await repository.mark_incomplete(session, tenant_id, response_id, reason)

    async def delete(self, database: Database, tenant_id: str, response_id: str) -> None:
        async with database.writing() as session:
            record = await repository.get(session, tenant_id, response_id)
            if record is None:
                raise _not_found(response_id)
            await repository.delete(session, record)

    def to_object(self, record: ResponseRecord) -> JSONObject:
        echo = dict(record.echo)
        utilization = echo.pop("context_utilization", None)
        created = record.created_at
        if created.tzinfo is None:  # SQLite hands back naive UTC datetimes
            created = created.replace(tzinfo=UTC)
        return response_object(
            response_id=record.id,
            created_at=int(created.timestamp()),
            echo=echo,
            status=record.status,  # type: ignore[arg-type]
            output=record.output,
            usage=record.usage,
            conversation_id=record.conversation_id,
            context_utilization=utilization,
            incomplete=record.incomplete_reason,
        )


def _resent(message: ConversationMessage, newest_user: bool) -> ChatMessage:
    """A stored message as the continuation resends it (per-turn context with the newest user
    message only, as the pipeline sends it)."""
    data: dict[str, object] = dict(message.to_openai(with_prefix=newest_user))
    for key in _REASONING:
        value = getattr(message, key, None)
        if value:
            data[key] = value
    kept = {key: value for key, value in data.items() if key in (*_RESENT, *_REASONING)}
    return cast(ChatMessage, kept)  # a stored message, as the store gives it


response_service = ResponseService()
