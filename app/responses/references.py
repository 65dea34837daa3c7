"""What a Responses request names rather than sends: ``item_reference`` items and the
``conversation`` it continues.

An ``{"type": "item_reference", "id": …}`` input item is replaced by the stored item it names,
before translation: an output item of one of the caller's stored Responses (the Vercel AI
SDK refers to its earlier output this way), or an item of one of the caller's conversations
as ``GET /v1/conversations/{id}/items`` lists it. Another tenant's id is unknown. A Response's
output item ids are recorded with the response (``record_output_items``) for this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import TypeAdapter
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.items_repository import items_repository
from app.conversations.repository import conversation_repository
from app.core.database import Database
from app.core.errors import BadRequest, NotFound
from app.db.models import ResponseItem
from app.llm.responses_items import NATIVE_BLOCK
from app.responses.conversations.items import DELETED, message_items, parse_derived_id
from app.responses.repository import response_repository
from app.responses.schemas import InputItem, ItemReference, ResponsesRequest
from app.wire.json import JSONObject

__all__ = [
    "record_output_items",
    "resolve_references",
    "resolve_request",
]

_ITEM: TypeAdapter[InputItem] = TypeAdapter(InputItem)
# The output items that render the stored answer (others, such as a compaction item, do not
# belong to its message and are not recorded).
_MESSAGE_ITEMS = ("reasoning", "message", "function_call")


async def resolve_request(
    database: Database, tenant_id: str, body: ResponsesRequest, *, store_false_strict: bool
) -> None:
    """Check the request's ``conversation`` (the caller's own) and make it the turn's
    ``conversation_id``; replace its ``item_reference`` items by what they name.

    ``store_false_strict``: ``store: false`` stores and manages nothing here
    (``CONTEXTGATE_RESPONSES_STORE_FALSE=passthrough``), so a ``conversation`` with it would be
    silently ignored: refused instead."""
    conversation = body.conversation_ref()
    references = isinstance(body.input, list) and any(
        isinstance(item, ItemReference) for item in body.input
    )
    if conversation is None and not references:
        return
    if conversation is not None:
        if not body.store and store_false_strict:
            raise BadRequest(
                "'conversation' continues a stored conversation, and this server stores "
                "nothing for 'store: false' (CONTEXTGATE_RESPONSES_STORE_FALSE=passthrough).",
                param="store",
                code="invalid_request",
            )
        if body.previous_response_id is not None:
            raise BadRequest(
                "Send either previous_response_id or conversation, not both.",
                param="conversation",
                code="invalid_request",
            )
        if body.conversation_id not in (None, conversation):
            raise BadRequest(
                "'conversation' and 'conversation_id' name different conversations.",
                param="conversation",
                code="invalid_request",
            )
    async with database.reading() as session:
        if conversation is not None:
            if await conversation_repository.get(session, tenant_id, conversation) is None:
                raise NotFound(
                    f"Conversation with id '{conversation}' not found.",
                    param="conversation",
                    code="conversation_not_found",
                )
            body.conversation_id = conversation
        if references and isinstance(body.input, list):
            body.input = await resolve_references(session, tenant_id, body.input)


async def resolve_references(
    session: AsyncSession, tenant_id: str, items: list[InputItem], where: str = "input"
) -> list[InputItem]:
    """``items`` with every ``item_reference`` replaced by the caller's stored item it names;
    an unknown (or another tenant's) id is a 404 naming it."""
    wanted = [item.id for item in items if isinstance(item, ItemReference)]
    if not wanted:
        return items
    found = await _stored_items(session, tenant_id, wanted)
    resolved: list[InputItem] = []
    for index, item in enumerate(items):
        if not isinstance(item, ItemReference):
            resolved.append(item)
            continue
        data = found.get(item.id)
        if data is None:
            raise NotFound(
                f"Item with id '{item.id}' not found.",
                param=f"{where}.{index}.id",
                code="item_not_found",
            )
        resolved.append(_ITEM.validate_python(data))
    return resolved


async def _stored_items(
    session: AsyncSession, tenant_id: str, ids: list[str]
) -> dict[str, JSONObject]:
    """The stored items (as JSON) the ids name, by id."""
    found: dict[str, JSONObject] = {}
    recorded = await items_repository.response_items(session, tenant_id, ids)
    records = await response_repository.get_many(
        session, tenant_id, [row.response_id for row in recorded.values()]
    )
    for item_id, row in recorded.items():
        record = records.get(row.response_id)
        for item in record.output if record is not None else ():
            if item.get("id") == item_id:
                found[item_id] = dict(item)
        if found.get(item_id, {}).get("type") == "reasoning":
            found[item_id] = await _whole_reasoning(session, tenant_id, row, found[item_id])
    for item_id in ids:
        parsed = parse_derived_id(item_id)
        if item_id in found or parsed is None:
            continue
        message = await items_repository.message(session, tenant_id, parsed[0])
        if message is None or message.status == DELETED:
            continue
        for stored in message_items(message):
            if stored.position == parsed[1] and stored.item["id"] == item_id:
                found[item_id] = dict(stored.item)
    return found


async def _whole_reasoning(
    session: AsyncSession, tenant_id: str, row: ResponseItem, shown: JSONObject
) -> JSONObject:
    """A reasoning item as stored, not as shown: a client that did not ask for
    ``reasoning.encrypted_content`` got the item without it, but the provider needs it back
    (OpenAI's own item is kept verbatim among the answer's blocks)."""
    if shown.get("encrypted_content"):
        return shown
    message = await items_repository.message_at(
        session, tenant_id, row.conversation_id, row.sequence_number
    )
    for block in (message.thinking_blocks or ()) if message is not None else ():
        item = block.get("item") if block.get("type") == NATIVE_BLOCK else None
        if isinstance(item, dict) and item.get("id") == row.id:
            return dict(item)
    return shown


async def record_output_items(
    session: AsyncSession,
    *,
    tenant_id: str,
    response_id: str,
    conversation_id: str,
    sequence_number: int,
    output: Sequence[Mapping[str, object]],
) -> None:
    """Remember where each output item of a stored Response lives (in the turn's transaction):
    its place among the answer's items, as ``message_items`` renders the stored answer."""
    await items_repository.record(
        session,
        [
            {
                "id": str(item["id"]),
                "tenant_id": tenant_id,
                "response_id": response_id,
                "conversation_id": conversation_id,
                "sequence_number": sequence_number,
                "position": position,
            }
            for position, item in enumerate(
                item for item in output if item.get("type") in _MESSAGE_ITEMS
            )
            if item.get("id")
        ],
    )
