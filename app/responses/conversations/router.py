"""The caller's conversations: list them (contextgate's), and OpenAI's Conversations API on
them: create (with items and metadata), retrieve (with every stored message and summary),
update the metadata, delete. Items: app/responses/conversations/items_router.py."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.compaction.repository import summary_repository
from app.compaction.schemas import SummaryOut
from app.conversations.repository import conversation_repository
from app.conversations.service import conversation_service
from app.core.errors import BadRequest
from app.keys.auth import CallerDep
from app.responses.conversations.items_service import items_service
from app.responses.conversations.schemas import (
    ConversationCreate,
    ConversationDeleted,
    ConversationDetail,
    ConversationList,
    ConversationSummary,
    ConversationUpdate,
    StoredMessage,
)
from app.state import StateDep

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


@router.get("", response_model=ConversationList)
async def list_conversations(
    caller: CallerDep,
    state: StateDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
) -> ConversationList:
    async with state.database.reading() as session:
        rows = await conversation_repository.list_recent(
            session, caller.tenant_id, limit=limit + 1, offset=offset
        )
        total = await conversation_repository.count(session, caller.tenant_id)
    return ConversationList(
        data=[
            ConversationSummary.model_validate(row, from_attributes=True) for row in rows[:limit]
        ],
        total=total,
        has_more=len(rows) > limit,
    )


@router.post("", response_model=ConversationSummary)
async def create_conversation(
    caller: CallerDep, state: StateDep, body: ConversationCreate | None = None
) -> ConversationSummary:
    body = body or ConversationCreate()  # no body: an empty conversation, as at OpenAI
    async with state.database.writing() as session:
        conversation = await items_service.create(
            session,
            state.tokens,
            caller.tenant_id,
            items=list(body.items or ()),
            metadata=body.metadata,
            model=state.settings.summarizer_model,
        )
        return ConversationSummary.model_validate(conversation, from_attributes=True)


@router.post("/{conversation_id}", response_model=ConversationSummary)
async def update_conversation(
    conversation_id: str, caller: CallerDep, state: StateDep, body: ConversationUpdate | None = None
) -> ConversationSummary:
    async with state.database.writing() as session:
        if body is None:  # someone else's id is a 404 before the body is looked at
            await conversation_service.get(session, caller.tenant_id, conversation_id)
            raise BadRequest("The request needs a JSON body with 'metadata'.", param="metadata")
        conversation = await items_service.update_metadata(
            session, caller.tenant_id, conversation_id, body.metadata
        )
        return ConversationSummary.model_validate(conversation, from_attributes=True)


@router.get("/{conversation_id}", response_model=ConversationDetail)
async def get_conversation(
    conversation_id: str, caller: CallerDep, state: StateDep
) -> ConversationDetail:
    async with state.database.reading() as session:
        conversation = await conversation_service.get(session, caller.tenant_id, conversation_id)
        messages = await conversation_service.messages(session, conversation)
        summaries = await summary_repository.all_summaries(
            session, caller.tenant_id, conversation.id
        )
    summary = ConversationSummary.model_validate(conversation, from_attributes=True)
    return ConversationDetail(
        **summary.model_dump(),
        messages=[StoredMessage.model_validate(m, from_attributes=True) for m in messages],
        summaries=[
            SummaryOut.model_validate(row, from_attributes=True).model_dump(mode="json")
            for row in summaries
        ],
    )


@router.delete("/{conversation_id}", response_model=ConversationDeleted)
async def delete_conversation(
    conversation_id: str, caller: CallerDep, state: StateDep
) -> ConversationDeleted:
    async with state.database.writing() as session:
        conversation = await conversation_service.get(session, caller.tenant_id, conversation_id)
        await conversation_repository.delete(session, conversation)
    return ConversationDeleted(id=conversation_id)
