"""Find or create the caller's conversation, store messages exactly once, rebuild history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.conversations.cache_state import CacheState
from app.conversations.counters import Counters
from app.conversations.edges import TAIL, EdgeCache, Edges
from app.conversations.fingerprint import (
    chain_hashes,
    content_hash,
    extend_chain,
    matches_prefix,
    new_messages_start,
)
from app.conversations.matching import match_by_prefix
from app.conversations.messages import (
    ConversationMessage,
    attach_reasoning_steps,
    to_conversation_message,
)
from app.conversations.repository import conversation_repository as repository
from app.conversations.resolved import HeadMoved, ResolvedConversation
from app.conversations.rows import MessageRow
from app.conversations.stamp import Stamp
from app.conversations.tail_cache import stamp_of, tail_cache, tail_stamp
from app.core.errors import NotFound
from app.db.models import Conversation, new_id
from app.db.models.base import utcnow
from app.tokens.counter import text_of

__all__ = [
    "ConversationService",
    "HeadMoved",
    "ResolvedConversation",
    "conversation_service",
]

_SYSTEM_ROLES = ("system", "developer")


def _cache_values(state: CacheState) -> dict[str, int]:
    return {
        "cache_cut_sequence": state.cut_sequence,
        "cache_cut_tokens": state.cut_tokens,
        "cache_cleared_sequence": state.cleared_sequence,
        "cache_prefix_floor": state.prefix_floor,
    }


class ConversationService:
    def __init__(self) -> None:
        # The stored ends of the conversations this process continued (edges.py).
        self.edges = EdgeCache()

    async def resolve(
        self,
        session: AsyncSession,
        tenant_id: str,
        incoming: Sequence[Mapping[str, object]],
        incoming_hashes: list[str],
        conversation_id: str | None,
        *,
        at: int | None = None,
    ) -> ResolvedConversation:
        """The conversation a turn goes on (by id, else by its leading messages); ``at``: the
        stored length it must still have (else ``HeadMoved``)."""
        if conversation_id is not None:
            conversation, summaries, ledger = await repository.get_with_summaries(
                session, tenant_id, conversation_id
            )
            if conversation is None:
                raise NotFound(
                    f"No conversation '{conversation_id}'.",
                    param="conversation_id",
                    code="conversation_not_found",
                )
            if at is not None and conversation.message_count != at:
                raise HeadMoved(conversation.id, at)
            start = await self._new_start(session, conversation, incoming_hashes)
            return ResolvedConversation(
                conversation.id, conversation, start, summaries, at, ledger, ledger_read=True
            )
        return await match_by_prefix(session, tenant_id, incoming_hashes)

    async def _new_start(
        self, session: AsyncSession, conversation: Conversation, incoming_hashes: list[str]
    ) -> int:
        chain = chain_hashes(incoming_hashes[: conversation.message_count])
        if matches_prefix(conversation.head_hash, conversation.message_count, chain):
            return conversation.message_count  # the whole history, as OpenAI clients send it
        system, tail = await self._edge_hashes(session, conversation, len(incoming_hashes))
        return new_messages_start(
            stored_count=conversation.message_count,
            stored_head=conversation.head_hash,
            incoming_hashes=incoming_hashes,
            stored_tail_hashes=tail,
            stored_system_hashes=system,
        )

    async def _edge_hashes(
        self, session: AsyncSession, conversation: Conversation, incoming: int
    ) -> tuple[list[str], list[str]]:
        """(the stored system prompt's content hashes, the last stored ones: at least
        ``incoming`` of them, or all): remembered since this process stored them, else read."""
        tenant_id, head = conversation.tenant_id, conversation.head_hash
        known = self.edges.get(tenant_id, conversation.id, head)
        need = min(incoming, conversation.message_count)
        if known is not None and known.system is not None and len(known.tail) >= need:
            return known.system, known.tail
        system, tail = await repository.edge_content_hashes(
            session,
            conversation.id,
            head=conversation.system_prompt_count,
            tail=max(incoming, TAIL),
        )
        calls = known.calls if known is not None else {}
        self.edges.put(tenant_id, conversation.id, Edges(head, system, tail, calls))
        return system, tail

    async def append(
        self,
        session: AsyncSession,
        tenant_id: str,
        conversation_id: str,
        messages: list[ConversationMessage],
        stamp: Stamp,
        *,
        at: int | None = None,
    ) -> Conversation:
        """Append messages at the current end (locking the conversation row), exactly once.

        ``at``: the messages go after the first ``at`` stored ones; when the conversation has
        grown past that meanwhile, they go on a branch holding those ``at`` messages (decided
        under the row lock: of two turns continuing the same end, the second branches)."""
        conversation = await repository.get(session, tenant_id, conversation_id, for_update=True)
        if conversation is not None and at is not None and conversation.message_count != at:
            branch = await self.fork(session, tenant_id, conversation.id, at)
            conversation = await repository.get(session, tenant_id, branch, for_update=True)
            assert conversation is not None
        if conversation is None:
            conversation = Conversation(
                id=conversation_id,
                tenant_id=tenant_id,
                message_count=0,
                total_tokens=0,
                turn_count=0,
                system_prompt_count=0,
                system_prompt_tokens=0,
                last_user_start_tokens=0,
                head_hash="",
                title=_title(messages),
            )
            session.add(conversation)
        before, before_count = conversation.head_hash, conversation.message_count
        call_turns = await self._call_turns(session, conversation, messages)
        request_id, cache_state = stamp.request_id, stamp.cache_state
        rows = [
            self._next_row(conversation, message, request_id, call_turns) for message in messages
        ]
        conversation.model = stamp.model
        if stamp.prompt_tokens is not None:
            conversation.last_prompt_tokens = stamp.prompt_tokens
        if cache_state is not None and cache_state.cut_sequence >= (
            conversation.cache_cut_sequence or 0
        ):
            for name, value in _cache_values(cache_state).items():
                setattr(conversation, name, value)
        await session.flush()  # the conversation row first (a new one is inserted here)
        if rows:  # one executemany, not one INSERT ... RETURNING per message
            await repository.insert_messages(session, rows)
            self.edges.appended(
                tenant_id,
                conversation.id,
                before=before,
                before_count=before_count,
                system_count=conversation.system_prompt_count,
                rows=rows,
            )
        return conversation

    async def append_turn(
        self,
        session: AsyncSession,
        tenant_id: str,
        resolved: ResolvedConversation,
        messages: list[ConversationMessage],
        stamp: Stamp,
    ) -> str:
        """Store a request's turn: a conversation read by this request advances with one
        guarded UPDATE (``append_continuing``), a new one is created by ``append``. Returns
        the conversation it went to: a branch when it had to continue ``resolved.at``."""
        if resolved.conversation is not None:
            return await self.append_continuing(
                session, tenant_id, resolved.conversation, messages, stamp, at=resolved.at
            )
        stored = await self.append(session, tenant_id, resolved.conversation_id, messages, stamp)
        return stored.id

    async def append_continuing(
        self,
        session: AsyncSession,
        tenant_id: str,
        known: Conversation,
        messages: list[ConversationMessage],
        stamp: Stamp,
        *,
        at: int | None = None,
    ) -> str:
        """``append`` to a conversation this request read earlier, without locking it first.

        One UPDATE guarded by the counters read earlier, then one INSERT of the messages; when
        the conversation changed meanwhile (a concurrent turn), the guard matches nothing and
        this falls back to ``append``, which locks the row and appends at the current end (or,
        with ``at``, on a branch). Returns the conversation the messages went to.
        """
        draft = Counters.of(known)
        call_turns = await self._call_turns(session, draft, messages)
        rows = [
            self._next_row(draft, message, stamp.request_id, call_turns) for message in messages
        ]
        values: dict[str, object] = {**draft.counters(), "model": stamp.model}
        if stamp.prompt_tokens is not None:
            values["last_prompt_tokens"] = stamp.prompt_tokens
        if stamp.cache_state is not None:
            values |= _cache_values(stamp.cache_state)
        # ``updated_at`` too: hiding an item moves nothing else (the kept rows, tail_cache.py).
        expected = {**Counters.of(known).counters(), "updated_at": known.updated_at}
        now = utcnow()
        if rows and await repository.update_if_unchanged(
            session, tenant_id, known.id, expected, values, now
        ):
            await repository.insert_messages(session, rows)
            tail_cache.appended(
                tenant_id,
                known.id,
                before=stamp_of(known),
                after=tail_stamp(draft.message_count, draft.head_hash, now),
                rows=rows,
            )
            self.edges.appended(
                tenant_id,
                known.id,
                before=known.head_hash,
                before_count=known.message_count,
                system_count=draft.system_prompt_count,
                rows=rows,
            )
            return known.id
        stored = await self.append(session, tenant_id, known.id, messages, stamp, at=at)
        return stored.id

    async def _call_turns(
        self,
        session: AsyncSession,
        conversation: Conversation | Counters,
        messages: list[ConversationMessage],
    ) -> dict[str, int]:
        """Turns of the stored tool calls that the tool results among ``messages`` answer."""
        batch_calls = {
            str(call.get("id")) for m in messages if m.tool_calls for call in m.tool_calls
        }
        wanted = {
            m.tool_call_id
            for m in messages
            if m.role == "tool" and m.tool_call_id and m.tool_call_id not in batch_calls
        }
        if not wanted or not conversation.message_count:
            return {}
        known = self.edges.get(conversation.tenant_id, conversation.id, conversation.head_hash)
        if known is not None and wanted <= known.calls.keys():  # stored by this process
            return {call_id: known.calls[call_id] for call_id in wanted}
        return await repository.tool_call_turns(session, conversation.id, wanted)

    def _next_row(
        self,
        conversation: Conversation | Counters,
        message: ConversationMessage,
        request_id: str | None,
        call_turns: dict[str, int],
    ) -> MessageRow:
        sequence = conversation.message_count
        start = conversation.total_tokens
        message_hash = message.content_hash or content_hash(message.to_openai())
        if message.role == "user":
            conversation.turn_count += 1
            conversation.last_user_sequence = sequence
            conversation.last_user_start_tokens = start
        if message.role in _SYSTEM_ROLES and sequence == conversation.system_prompt_count:
            conversation.system_prompt_count += 1
            conversation.system_prompt_tokens += message.token_count
        conversation.head_hash = extend_chain(conversation.head_hash, message_hash)
        conversation.message_count = sequence + 1
        conversation.total_tokens = start + message.token_count
        message.sequence_number = sequence
        message.start_tokens = start
        # A tool result belongs to the turn of its call, even when it arrives late.
        turn = conversation.turn_count
        if message.role == "tool" and message.tool_call_id:
            turn = call_turns.setdefault(message.tool_call_id, turn)
        if message.role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                call_turns[str(call.get("id"))] = turn
        message.turn_number = turn
        return {
            "conversation_id": conversation.id,
            "tenant_id": conversation.tenant_id,
            "sequence_number": sequence,
            "turn_number": turn,
            "role": message.role,
            "content": message.content,
            "name": message.name,
            "tool_calls": message.tool_calls,
            "tool_call_id": message.tool_call_id,
            "reasoning_content": message.reasoning_content,
            "thinking_blocks": message.thinking_blocks,
            "context_prefix": message.context_prefix,
            "prompt_hash": message.prompt_hash,
            "token_count": message.token_count,
            "start_tokens": start,
            "chain_hash": conversation.head_hash,
            "content_hash": message_hash,
            "status": message.status,
            "request_id": request_id,
        }

    async def messages(
        self, session: AsyncSession, conversation: Conversation
    ) -> list[ConversationMessage]:
        rows = await repository.all_messages(session, conversation.id)
        return attach_reasoning_steps([to_conversation_message(row) for row in rows])

    async def get(
        self, session: AsyncSession, tenant_id: str, conversation_id: str
    ) -> Conversation:
        conversation = await repository.get(session, tenant_id, conversation_id)
        if conversation is None:
            raise NotFound(f"No conversation '{conversation_id}'.", code="conversation_not_found")
        return conversation

    async def fork(
        self, session: AsyncSession, tenant_id: str, conversation_id: str, upto: int
    ) -> str:
        """A new conversation holding messages [0, upto) of this one, stored as they are:
        continuing it branches off without seeing the messages after ``upto``."""
        source = await self.get(session, tenant_id, conversation_id)
        last, last_user = await repository.prefix_edges(session, source.id, upto)
        if last is None:
            raise NotFound(f"No messages to branch from in '{conversation_id}'.")
        fork = Conversation(
            id=new_id("conv"),
            tenant_id=tenant_id,
            model=source.model,
            title=source.title,
            message_count=last.sequence_number + 1,
            total_tokens=last.start_tokens + last.token_count,
            turn_count=last.turn_number,
            system_prompt_count=min(source.system_prompt_count, upto),
            system_prompt_tokens=source.system_prompt_tokens
            if source.system_prompt_count <= upto
            else 0,
            last_user_sequence=last_user.sequence_number if last_user else None,
            last_user_start_tokens=last_user.start_tokens if last_user else 0,
            head_hash=last.chain_hash,
        )
        session.add(fork)
        await session.flush()
        await repository.copy_messages(session, source.id, fork.id, upto)
        return fork.id


def _title(messages: list[ConversationMessage]) -> str | None:
    for message in messages:
        if message.role == "user":
            text = " ".join(text_of(message.content).split())
            return text[:120] or None
    return None


conversation_service = ConversationService()
