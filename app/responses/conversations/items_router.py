"""OpenAI's Conversations API items on the caller's conversations: list, create, retrieve,
delete (``/v1/conversations/{id}/items``). Shapes: Responses items
(app/responses/conversations/items.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from app.conversations.service import conversation_service
from app.core.errors import BadRequest
from app.keys.auth import CallerDep
from app.responses.conversations.items import StoredItem
from app.responses.conversations.items_service import items_service
from app.responses.conversations.schemas import ConversationSummary, ItemsCreate
from app.state import StateDep
from app.wire.json import JSONObject

router = APIRouter(prefix="/v1/conversations/{conversation_id}/items", tags=["conversations"])


def _page(items: list[StoredItem], has_more: bool = False) -> JSONObject:
    data = [stored.item for stored in items]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


class ItemsPage(BaseModel):
    """The list's query parameters (OpenAI's)."""

    limit: int = Field(20, ge=1, le=100)
    order: Literal["asc", "desc"] = "desc"
    after: str | None = None
    include: list[str] | None = None  # accepted; items carry all they have


@router.get("")
async def list_items(
    conversation_id: str, caller: CallerDep, state: StateDep, page: Annotated[ItemsPage, Query()]
) -> JSONObject:
    limit, order, after = page.limit, page.order, page.after
    async with state.database.reading() as session:
        conversation = await conversation_service.get(session, caller.tenant_id, conversation_id)
        items = await items_service.items(session, caller.tenant_id, conversation)
    if order == "desc":
        items.reverse()
    if after is not None:
        ids = [stored.item["id"] for stored in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    return _page(items[:limit], has_more=len(items) > limit)


@router.post("")
async def create_items(
    conversation_id: str, caller: CallerDep, state: StateDep, body: ItemsCreate | None = None
) -> JSONObject:
    async with state.database.writing() as session:
        if body is None:  # someone else's id is a 404 before the body is looked at
            await conversation_service.get(session, caller.tenant_id, conversation_id)
            raise BadRequest("The request needs a JSON body with 'items'.", param="items")
        created = await items_service.add(
            session,
            state.tokens,
            caller.tenant_id,
            conversation_id,
            list(body.items),
            state.settings.summarizer_model,
        )
    return _page(created)


@router.get("/{item_id}")
async def get_item(
    conversation_id: str, item_id: str, caller: CallerDep, state: StateDep
) -> JSONObject:
    async with state.database.reading() as session:
        found = await items_service.find(session, caller.tenant_id, conversation_id, item_id)
    return dict(found.item)


@router.delete("/{item_id}", response_model=ConversationSummary)
async def delete_item(
    conversation_id: str, item_id: str, caller: CallerDep, state: StateDep
) -> ConversationSummary:
    """The item leaves the list and every later prompt; its raw record is kept."""
    async with state.database.writing() as session:
        conversation = await items_service.delete(
            session, caller.tenant_id, conversation_id, item_id
        )
        return ConversationSummary.model_validate(conversation, from_attributes=True)
