"""Extract long-term memories from finished turns, in the background, after the answer."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from app.compaction.llm_json import Summarizer, SummarizerFailed
from app.compaction.repository import summary_repository
from app.compaction.windows import render_transcript
from app.embedders.embedder import EmbeddingFailed, embed_texts
from app.memories.index_refresh import IndexServices, refresh_soon
from app.memories.prompts import EXTRACT_SYSTEM, extract_user
from app.memories.retrieval import RetrievalQuery, retrieve
from app.memories.schemas import ExtractionOutput
from app.memories.service import MemoryQuotaExceeded, NewMemory, memory_service
from app.tokens.counter import TokenCounter

__all__ = ["ExtractionJob", "extract_memories", "extraction_due", "run_extraction"]

logger = logging.getLogger(__name__)
_EXISTING_SHOWN = 10


@dataclass(frozen=True, slots=True)
class ExtractionJob:
    """The newest ``turns`` of a conversation read by ``model`` for ``user``'s memory; lines
    counted for ``count_model`` (the conversation's)."""

    tenant_id: str
    user: str
    conversation_id: str
    turns: int
    model: str
    count_model: str


def extraction_due(mode: str, every: int, turn_count: int) -> int:
    """How many of the newest turns to read now (0: not now)."""
    if mode == "every_turn":
        return 1
    if mode == "periodic" and turn_count > 0 and turn_count % every == 0:
        return every
    return 0


async def extract_memories(
    services: IndexServices, summarizer: Summarizer, tokens: TokenCounter, job: ExtractionJob
) -> int:
    """Run one extraction; returns how many memories were created or updated."""
    settings = summarizer.settings
    tenant_id, user, conversation_id = job.tenant_id, job.user, job.conversation_id
    async with services.database.reading() as session:
        conversation = await summary_repository.conversation(session, tenant_id, conversation_id)
        if conversation is None or conversation.turn_count == 0:
            return 0
        messages = await summary_repository.messages_between(
            session,
            conversation_id,
            first_sequence=conversation.system_prompt_count,
            first_turn=max(1, conversation.turn_count - job.turns + 1),
            last_turn=conversation.turn_count,
        )
        transcript = render_transcript(messages)
        query = RetrievalQuery(
            tenant_id,
            user,
            transcript,
            lambda text: tokens.count_text(text, job.count_model),
            top_k=_EXISTING_SHOWN,
            min_score=0.0,
        )
        existing = await retrieve(services, settings, session, query, [])
    if not transcript:
        return 0
    shown = [(m.id, m.memory_type, m.content) for m in existing]
    output, _cost = await summarizer.call_json(
        job.model, EXTRACT_SYSTEM, extract_user(shown, transcript), ExtractionOutput
    )
    if not output.memories:
        return 0
    vectors: list[list[float] | None] = [None] * len(output.memories)
    embedding_model = settings.embedding_model
    if embedding_model:
        try:
            texts = [m.content for m in output.memories]
            found = await embed_texts(
                summarizer.llm, embedding_model, texts, timeout_s=settings.summarizer_timeout_s
            )
            vectors = list(found)
        except EmbeddingFailed as exc:
            logger.warning("memory embeddings failed", extra={"error": str(exc)})
    known = {memory_id for memory_id, _, _ in shown}
    async with services.database.writing() as session:
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
                    dedupe_threshold=settings.memory_dedupe_similarity,
                    quota=settings.tenant_max_memories,
                )
            except MemoryQuotaExceeded:  # the tenant's quota: the rest is not stored
                logger.warning("memory quota reached", extra={"tenant_id": tenant_id})
                break
    refresh_soon(services, tenant_id, user)
    return len(output.memories)


async def run_extraction(
    services: IndexServices, summarizer: Summarizer, tokens: TokenCounter, job: ExtractionJob
) -> None:
    """Background entry point: failures are logged, never raised (the answer is gone)."""
    try:
        await extract_memories(services, summarizer, tokens, job)
    except SummarizerFailed as exc:
        logger.warning("memory extraction failed", extra={"error": str(exc)})
    except Exception:
        logger.exception("memory extraction crashed")
