"""The memory API: list, add, delete one, forget a user; the caller's tenant only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.db.models import Memory
from app.embedders.embedder import EmbeddingFailed, embed_texts
from app.keys.auth import CallerDep
from app.memories.deps import MemoryPartsDep, index_services
from app.memories.facts import FactValue, upsert_fact
from app.memories.index_refresh import refresh_soon
from app.memories.schemas import MemoryCreate, MemoryDeleted, MemoryList, MemoryOut, UserForgotten
from app.memories.service import NewMemory, memory_service

router = APIRouter(prefix="/v1/memories", tags=["memories"])
UserQuery = Annotated[str, Query(min_length=1, max_length=200)]


def _out(memory: Memory) -> MemoryOut:
    return MemoryOut(
        id=memory.id,
        user=memory.user_id,
        content=memory.content,
        key=memory.key,
        memory_type=memory.memory_type,
        importance=memory.importance,
        confidence=memory.confidence,
        source=memory.source,
        conversation_id=memory.conversation_id,
        superseded_by=memory.superseded_by,
        created_at=memory.created_at,
        updated_at=memory.updated_at,
    )


@router.get("", response_model=MemoryList)
async def list_memories(
    caller: CallerDep, state: MemoryPartsDep, user: UserQuery, include_superseded: bool = False
) -> MemoryList:
    async with state.database.reading() as session:
        rows = await memory_service.list(
            session, caller.tenant_id, user, include_superseded=include_superseded
        )
    return MemoryList(data=[_out(row) for row in rows])


@router.post("", response_model=MemoryOut)
async def add_memory(body: MemoryCreate, caller: CallerDep, state: MemoryPartsDep) -> MemoryOut:
    if body.key is not None and body.value is not None:
        async with state.database.writing() as session:
            sent = FactValue(
                body.key.strip(), body.value, body.memory_type or "fact", body.importance
            )
            upserted = await upsert_fact(session, caller.tenant_id, body.user, sent)
        return _out(upserted.memory)
    assert body.content is not None
    new = NewMemory(
        content=body.content,
        memory_type=body.memory_type or "note",
        importance=body.importance,
        supersedes=tuple(body.supersedes),
    )
    model = state.settings.embedding_model
    if model:
        try:
            timeout_s = state.settings.summarizer_timeout_s
            found = await embed_texts(state.llm, model, [body.content], timeout_s=timeout_s)
            new.embedding = found[0]
            new.embedding_model = model
        except EmbeddingFailed:
            pass  # stored without a vector: retrieval falls back to BM25 for it
    async with state.database.writing() as session:
        memory, _ = await memory_service.add(
            session,
            caller.tenant_id,
            body.user,
            new,
            dedupe_threshold=state.settings.memory_dedupe_similarity,
            quota=state.settings.tenant_max_memories,
        )
    refresh_soon(index_services(state), caller.tenant_id, body.user)
    return _out(memory)


@router.delete("/{memory_id}", response_model=MemoryDeleted)
async def delete_memory(memory_id: str, caller: CallerDep, state: MemoryPartsDep) -> MemoryDeleted:
    async with state.database.writing() as session:
        await memory_service.delete(session, caller.tenant_id, memory_id)
    return MemoryDeleted(id=memory_id)


@router.delete("", response_model=UserForgotten)
async def forget_user(caller: CallerDep, state: MemoryPartsDep, user: UserQuery) -> UserForgotten:
    async with state.database.writing() as session:
        deleted = await memory_service.forget(session, caller.tenant_id, user)
    return UserForgotten(user=user, deleted=deleted)
