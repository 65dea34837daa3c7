"""``POST /v1/conversations/{id}/save``: the client ends or saves a conversation (seed 003's
``on_save`` extraction mode).

The turns not read by an earlier save (at most the newest ``SAVE_MAX_TURNS``) go to the memory
extractor once, for the user named in the body; the conversation remembers how far it was read.
A failing extractor answers ``status: "failed"`` with the reason and moves nothing, so the same
save can be sent again; it never fails the request.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field

from app.compaction.llm_json import Summarizer, SummarizerFailed
from app.compaction.repository import summary_repository
from app.core.errors import BadRequest, NotFound
from app.keys.auth import CallerDep
from app.llm.reach import helper_models
from app.memories.deps import MemoryPartsDep, index_services
from app.memories.extraction import ExtractionJob, extract_memories

__all__ = ["SAVE_MAX_TURNS", "ConversationSave", "ConversationSaved", "router"]

SAVE_MAX_TURNS = 50

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


class ConversationSave(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1, max_length=200)  # whose long-term memory it feeds
    summarizer_model: str | None = Field(default=None, min_length=1, max_length=200)


class ConversationSaved(BaseModel):
    id: str
    object: Literal["conversation.saved"] = "conversation.saved"
    user: str
    status: Literal["saved", "nothing_new", "failed"]
    first_turn: int | None = None
    last_turn: int | None = None
    memories_extracted: int = 0
    error: str | None = None


@router.post("/{conversation_id}/save", response_model=ConversationSaved)
async def save_conversation(
    conversation_id: str,
    caller: CallerDep,
    state: MemoryPartsDep,
    body: Annotated[ConversationSave | None, Body()] = None,
) -> ConversationSaved:
    tenant_id = caller.tenant_id
    async with state.database.reading() as session:
        conversation = await summary_repository.conversation(session, tenant_id, conversation_id)
    if conversation is None:  # before the body: someone else's id is a 404 whatever was sent
        raise NotFound(f"No conversation '{conversation_id}'.", code="conversation_not_found")
    if body is None:
        raise BadRequest(
            "The body must name the 'user' whose memory the conversation feeds.", param="user"
        )
    saved = ConversationSaved(id=conversation_id, user=body.user, status="nothing_new")
    last = conversation.turn_count
    first = max(conversation.memory_saved_turn + 1, last - SAVE_MAX_TURNS + 1, 1)
    if last < first:
        return saved
    saved.first_turn, saved.last_turn = first, last
    model_name = conversation.model or state.settings.summarizer_model
    try:
        job = ExtractionJob(
            tenant_id=tenant_id,
            user=body.user,
            conversation_id=conversation_id,
            turns=last - first + 1,
            model=helper_models(state).summarizer_for(body.summarizer_model, model_name),
            count_model=model_name,
        )
        indexes = index_services(state)
        summarizer = Summarizer(state.llm, state.settings)
        saved.memories_extracted = await extract_memories(indexes, summarizer, state.tokens, job)
    except SummarizerFailed as exc:
        saved.status, saved.error = "failed", str(exc)[:500]
        return saved
    async with state.database.writing() as session:
        row = await summary_repository.conversation(session, tenant_id, conversation_id, lock=True)
        if row is not None and row.memory_saved_turn < last:
            row.memory_saved_turn = last
    saved.status = "saved"
    return saved
