"""Extract long-term memories from finished turns, in the background, after the answer."""

from __future__ import annotations

import logging

from app.memories.compaction import render_transcript
from app.memories.embeddings import EmbeddingFailed, embed
from app.memories.index_refresh import refresh_soon
from app.memories.llm_json import SummarizerFailed, call_json
from app.memories.prompts import EXTRACT_SYSTEM, extract_user
from app.memories.repository import memory_repository
from app.memories.retrieval import retrieve
from app.memories.schemas import ExtractionOutput
from app.memories.service import MemoryQuotaExceeded, NewMemory, memory_service
from app.state import AppState

__all__ = ["extract_memories", "extraction_due"]

logger = logging.getLogger(__name__)
_EXISTING_SHOWN = 10


def extraction_due(mode: str, every: int, turn_count: int) -> int:
    """How many of the newest turns to read now (0: not now)."""
    if mode == "every_turn":
        return 1
    if mode == "periodic" and turn_count > 0 and turn_count % every == 0:
        return every
    return 0


async def extract_memories(
    state: AppState,
    *,
    tenant_id: str,
    user: str,
    conversation_id: str,
    turns: int,
    model: str,
    count_model: str,
) -> int:
    """Run one extraction; returns how many memories were created or updated."""
    async with state.database.reading() as session:
        conversation = await memory_repository.conversation(session, tenant_id, conversation_id)
        if conversation is None or conversation.turn_count == 0:
            return 0
        messages = await memory_repository.messages_between(
            session,
            conversation_id,
            first_sequence=conversation.system_prompt_count,
            first_turn=max(1, conversation.turn_count - turns + 1),
            last_turn=conversation.turn_count,
        )
        transcript = render_transcript(messages)
        existing = await retrieve(
            state,
            session,
            tenant_id,
            user,
            transcript,
            count=lambda text: state.tokens.count_text(text, count_model),
            notes=[],
            top_k=_EXISTING_SHOWN,
            min_score=0.0,
        )
    if not transcript:
        return 0
    shown = [(m.id, m.memory_type, m.content) for m in existing]
    output, _cost = await call_json(
        state, model, EXTRACT_SYSTEM, extract_user(shown, transcript), ExtractionOutput
    )
    if not output.memories:
        return 0
    vectors: list[list[float] | None] = [None] * len(output.memories)
    embedding_model = state.settings.embedding_model
    if embedding_model:
        try:
            found = await embed(state, embedding_model, [m.content for m in output.memories])
            vectors = list(found)
        except EmbeddingFailed as exc:
            logger.warning("memory embeddings failed", extra={"error": str(exc)})
    known = {memory_id for memory_id, _, _ in shown}
    async with state.database.writing() as session:
        for extracted, vector in zip(output.memories, vectors, strict=True):
            try:
                await memory_service.add(
                    session,
                    tenant_id,
                    user,
                    NewMemory(
                        content=extracted.content,
                        memory_type=extracted.memory_type,
                        importance=extracted.importance,
                        confidence=0.8,
                        source="extraction",
                        conversation_id=conversation_id,
                        supersedes=tuple(i for i in extracted.supersedes if i in known),
                        embedding=vector,
                        embedding_model=embedding_model if vector is not None else None,
                    ),
                    dedupe_threshold=state.settings.memory_dedupe_similarity,
                    quota=state.settings.tenant_max_memories,
                )
            except MemoryQuotaExceeded:  # the tenant's quota: the rest is not stored
                logger.warning("memory quota reached", extra={"tenant_id": tenant_id})
                break
    refresh_soon(state, tenant_id, user)
    return len(output.memories)


async def run_extraction(state: AppState, **kwargs: object) -> None:
    """Background entry point: failures are logged, never raised (the answer is gone)."""
    try:
        await extract_memories(state, **kwargs)  # type: ignore[arg-type]
    except SummarizerFailed as exc:
        logger.warning("memory extraction failed", extra={"error": str(exc)})
    except Exception:
        logger.exception("memory extraction crashed")
