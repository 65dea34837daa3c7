"""The Conversations API on contextgate's conversations: create one with items and metadata,
update its metadata, list / add / retrieve / delete its items.

Items are the stored messages in Responses item shapes (app/responses/conversations/items.py). Added
items are stored as messages, as a turn's would be, so the conversation's history (and every
later turn on it) holds them. Deleting an item does not erase it (principle 2: nothing is
silently dropped): its stored message is marked ``deleted``, which takes it out of the item
list and out of every later prompt, while ``GET /v1/conversations/{id}`` still shows the raw
record with that status. Deleting the whole conversation erases it.
"""

from __future__ import annotations

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.fingerprint import content_hash
from app.conversations.items_repository import items_repository
from app.conversations.messages import STORED_KEYS, ConversationMessage
from app.conversations.repository import conversation_repository
from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.core.errors import BadRequest, NotFound
from app.db.models import Conversation, new_id, utcnow
from app.protocol.chat import ChatCompletionRequest
from app.responses.conversations.items import DELETED, StoredItem, message_items
from app.responses.references import resolve_references
from app.responses.schemas import InputItem, ResponsesRequest
from app.responses.translate import chat_messages
from app.tokens.counter import TokenCounter

__all__ = ["ItemsService", "items_service"]


class ItemsService:
    async def create(
        self,
        session: AsyncSession,
        tokens: TokenCounter,
        tenant_id: str,
        *,
        items: list[InputItem],
        metadata: dict[str, str] | None,
        model: str,
    ) -> Conversation:
        """A new conversation holding ``items`` (validated before anything is written)."""
        messages = await self._messages(session, tokens, tenant_id, items, model)
        now = utcnow()
        conversation = Conversation(
            id=new_id("conv"),
            created_at=now,
            updated_at=now,
            tenant_id=tenant_id,
            meta=metadata or {},
            message_count=0,
            total_tokens=0,
            turn_count=0,
            system_prompt_count=0,
            system_prompt_tokens=0,
            last_user_start_tokens=0,
            head_hash="",
        )
        session.add(conversation)
        await session.flush()
        if messages:
            await self._append(session, tenant_id, conversation, messages)
        return conversation

    async def update_metadata(
        self, session: AsyncSession, tenant_id: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation:
        conversation = await conversation_service.get(session, tenant_id, conversation_id)
        conversation.meta = metadata
        conversation.updated_at = utcnow()  # set, not expired by onupdate: read after flush
        await session.flush()
        return conversation

    async def add(
        self,
        session: AsyncSession,
        tokens: TokenCounter,
        tenant_id: str,
        conversation_id: str,
        items: list[InputItem],
        fallback_model: str,
    ) -> list[StoredItem]:
        """Append ``items`` at the conversation's end; the items stored for them.

        Nothing is stored twice: items that repeat the conversation's newest stored messages
        (a response on this conversation stored them already, as the Agents SDK's session
        adds a turn's output after the turn) are not stored again, as the chat door skips a
        resent history."""
        conversation = await conversation_service.get(session, tenant_id, conversation_id)
        model = conversation.model or fallback_model
        messages = await self._messages(session, tokens, tenant_id, items, model, "items")
        if not messages:
            raise BadRequest(
                "The items hold no message to store.", param="items", code="empty_input"
            )
        resolved = await conversation_service.resolve(
            session,
            tenant_id,
            [m.to_openai() for m in messages],
            [m.content_hash for m in messages],
            conversation.id,
        )
        count = conversation.message_count
        first = max(0, count - resolved.new_start)
        if messages[resolved.new_start :]:
            await self._append(session, tenant_id, conversation, messages[resolved.new_start :])
        recorded = await items_repository.recorded_ids(session, tenant_id, conversation.id)
        rows = await items_repository.messages_from(session, conversation.id, first)
        return [
            item
            for row in rows
            if row.status != DELETED
            for item in message_items(row, recorded.get(row.sequence_number))
        ]

    async def items(
        self, session: AsyncSession, tenant_id: str, conversation: Conversation
    ) -> list[StoredItem]:
        """Every item of the conversation, oldest first (deleted ones left out)."""
        recorded = await items_repository.recorded_ids(session, tenant_id, conversation.id)
        rows = await conversation_repository.all_messages(session, conversation.id)
        return [
            item
            for row in rows
            if row.status != DELETED
            for item in message_items(row, recorded.get(row.sequence_number))
        ]

    async def find(
        self, session: AsyncSession, tenant_id: str, conversation_id: str, item_id: str
    ) -> StoredItem:
        conversation = await conversation_service.get(session, tenant_id, conversation_id)
        for item in await self.items(session, tenant_id, conversation):
            if item.item["id"] == item_id:
                return item
        raise NotFound(
            f"Item with id '{item_id}' not found in conversation '{conversation_id}'.",
            param="item_id",
            code="item_not_found",
        )

    async def delete(
        self, session: AsyncSession, tenant_id: str, conversation_id: str, item_id: str
    ) -> Conversation:
        """Mark the stored message of the item ``deleted`` (see the module's docstring)."""
        found = await self.find(session, tenant_id, conversation_id, item_id)
        await items_repository.hide(session, tenant_id, conversation_id, found.message_id, DELETED)
        # The kept prompt may hold it: the next call rebuilds the prompt without it.
        await items_repository.forget_kept_prompt(session, tenant_id, conversation_id)
        return await conversation_service.get(session, tenant_id, conversation_id)

    async def _messages(
        self,
        session: AsyncSession,
        tokens: TokenCounter,
        tenant_id: str,
        items: list[InputItem],
        model: str,
        where: str = "items",
    ) -> list[ConversationMessage]:
        """Items as the messages stored for them: translated as ``POST /v1/responses``
        translates its input, hashed and counted as the turn pipeline does."""
        if not items:
            return []
        items = await resolve_references(session, tenant_id, items, where)
        chat = chat_messages(ResponsesRequest(model=model, input=items))
        try:
            request = ChatCompletionRequest.model_validate({"model": model, "messages": chat})
        except ValidationError as error:
            first = error.errors()[0]
            raise BadRequest(f"Invalid items: {first.get('msg')}", param=where) from None
        dumped = [
            m.model_dump(include=set(STORED_KEYS), exclude_none=True) for m in request.messages
        ]
        return [
            ConversationMessage(
                **message,
                token_count=tokens.count_message(message, model),
                content_hash=content_hash(message),
            )
            for message in dumped
        ]

    async def _append(
        self,
        session: AsyncSession,
        tenant_id: str,
        conversation: Conversation,
        messages: list[ConversationMessage],
    ) -> int:
        """Store the messages at the end; the sequence number of the first one."""
        first, model = conversation.message_count, conversation.model
        stored = await conversation_service.append(
            session, tenant_id, conversation.id, messages, Stamp(model or "")
        )
        stored.model = model  # adding items answers nothing: the model stays what it was
        if stored.title is None:
            stored.title = next(
                (m.content for m in messages if m.role == "user" and isinstance(m.content, str)),
                None,
            )
            stored.title = stored.title[:120] if stored.title else None
        stored.updated_at = utcnow()
        await session.flush()
        return first


items_service = ItemsService()
