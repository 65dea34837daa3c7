"""Memory vectors as float32 blobs, and the retrieval index kept up to date incrementally, on
SQLite and PostgreSQL: the blob round trip, the migration of JSON vectors (and back), a new,
changed, superseded or deleted memory seen by the next query without rebuilding the index,
another worker's writes seen (a lagging clock included), and one tenant's index never holding
another's memories."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import numpy as np
import sqlalchemy as sa
from alembic import command
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.commands.migrations import alembic_config
from app.core.settings import Settings
from app.db.models import Memory, utcnow
from app.embedders.embedded import WORDLLAMA_NAME
from app.embedders.embedder import decode_vector, encode_vector
from app.memories.memory_index import UserIndex
from app.memories.repository import memory_repository
from app.memories.retrieval import RetrievalQuery, retrieve
from app.state import AppState
from app.turns.memory_services import index_services
from tests.memories.helpers import app_state, drain

TEA = "Uma drinks green tea every morning"
BASE = [TEA, "Uma's car is a red Volvo", "Uma works as a nurse in a children's hospital"]


async def add(client: httpx.AsyncClient, user: str, content: str, **extra: Any) -> dict[str, Any]:
    response = await client.post("/v1/memories", json={"user": user, "content": content, **extra})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def found(state: AppState, user: str, query: str, tenant: str = "default") -> list[str]:
    async with state.database.reading() as session:
        wanted = RetrievalQuery(tenant, user, query, len, top_k=8)
        got = await retrieve(index_services(state), state.settings, session, wanted, [])
    return [r.content for r in got]


def cached(state: AppState, user: str, tenant: str = "default") -> UserIndex:
    entry = state.memory.indexes.cached_entry((tenant, user))
    assert entry is not None
    assert isinstance(entry[1], UserIndex)
    return entry[1]


async def test_vector_blob_round_trip(database_url: str) -> None:
    vector = np.random.default_rng(3).normal(size=256).astype(np.float32)
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                sa.insert(Memory).values(
                    id="mem_blob",
                    tenant_id="t",
                    user_id="u",
                    content="c",
                    memory_type="fact",
                    importance=5,
                    confidence=1.0,
                    source="api",
                    embedding=encode_vector(vector),
                    embedding_model=WORDLLAMA_NAME,
                    created_at=utcnow(),
                    updated_at=utcnow(),
                )
            )
        async with AsyncSession(engine) as session:
            (row,) = await memory_repository.memory_rows(session, "t", "u")
    finally:
        await engine.dispose()
    assert isinstance(row.embedding, bytes)
    assert len(row.embedding) == 256 * 4
    assert np.array_equal(decode_vector(row.embedding), vector)
    assert row.embedding_model == WORDLLAMA_NAME


async def test_migration_converts_json_vectors_and_back(database_url: str) -> None:
    config: Any = alembic_config(database_url)
    await asyncio.to_thread(command.downgrade, config, "0006b")  # before 0014: JSON vectors
    values = [0.25, -1.5, 3.0, 1e-3]
    memories = sa.table(
        "memories",
        *(sa.column(name) for name in ("id", "tenant_id", "user_id", "content", "memory_type")),
        *(sa.column(name) for name in ("importance", "confidence", "source", "embedding_model")),
        sa.column("embedding", sa.JSON()),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("updated_at", sa.DateTime(timezone=True)),
    )
    common = {
        "tenant_id": "t",
        "user_id": "u",
        "content": "c",
        "memory_type": "fact",
        "importance": 5,
        "confidence": 1.0,
        "source": "api",
        "created_at": utcnow(),
        "updated_at": utcnow(),
    }
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as connection:
            for memory_id, embedding, model in (
                ("m_vector", values, "model-a"),
                ("m_json_null", None, None),
                ("m_sql_null", sa.null(), None),
                ("m_junk", {"not": "a vector"}, "model-a"),
                ("m_mixed", [1.0, "x"], "model-a"),
            ):
                await connection.execute(
                    memories.insert().values(
                        id=memory_id, embedding=embedding, embedding_model=model, **common
                    )
                )
        await asyncio.to_thread(command.upgrade, config, "heads")
        async with engine.connect() as connection:
            query = select(Memory.id, Memory.embedding, Memory.embedding_model)
            rows = {r[0]: r for r in (await connection.execute(query)).all()}
        assert np.array_equal(
            decode_vector(rows["m_vector"].embedding), np.asarray(values, np.float32)
        )
        assert rows["m_vector"].embedding_model == "model-a"  # kept
        assert all(rows[i].embedding is None for i in ("m_json_null", "m_sql_null", "m_junk"))
        assert rows["m_mixed"].embedding is None

        await asyncio.to_thread(command.downgrade, config, "0006b")
        async with engine.connect() as connection:
            back = (
                await connection.execute(
                    select(memories.c.embedding).where(memories.c.id == "m_vector")
                )
            ).scalar_one()
        assert back == [np.float32(v).item() for v in values]
        await asyncio.to_thread(command.upgrade, config, "heads")
    finally:
        await engine.dispose()


async def test_index_takes_new_changed_superseded_and_deleted_memories_in_place(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    database_url: str,
) -> None:
    client = await client_for(make_settings(database_url=database_url))
    state = app_state(client)
    for text in BASE:
        await add(client, "uma", text)
    assert (await found(state, "uma", "What hot beverage should I offer her?"))[0] == TEA
    index = cached(state, "uma")
    await drain(client)  # the vectors computed on the way are stored

    locker = await add(client, "uma", "Uma's locker code is QX-7731")
    assert (await found(state, "uma", "Which locker is QX-7731?"))[0] == locker["content"]
    cello = await add(client, "uma", "Uma plays the cello in a string quartet")
    assert cello["content"] in await found(state, "uma", "Which musical instrument is hers?")
    assert cached(state, "uma") is index  # brought up to date, not rebuilt
    assert index.count == 5
    assert index.has_vector.all()

    # Superseded: gone at the next query; deleted (the count drops, no row says which): gone too.
    moved = await add(client, "uma", "Uma's locker code is now QX-9902", supersedes=[locker["id"]])
    got = await found(state, "uma", "Which locker is QX-7731?")
    assert locker["content"] not in got
    assert moved["content"] in got
    deleted = await client.delete(f"/v1/memories/{cello['id']}")
    assert deleted.status_code == 200
    assert cello["content"] not in await found(state, "uma", "Which musical instrument is hers?")
    assert cached(state, "uma") is index

    # What the index holds is what a build from the stored rows gives.
    await drain(client)
    async with state.database.reading() as session:
        rows = await memory_repository.memory_rows(session, "default", "uma")
    fresh = UserIndex.build(rows, index.embedder_name)
    assert [c.id for c in index.candidates] == [c.id for c in fresh.candidates]
    assert fresh.has_vector.all()
    assert index.matrix is not None
    assert fresh.matrix is not None
    assert np.allclose(index.matrix, fresh.matrix, atol=1e-6)


async def test_another_workers_writes_are_seen(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    database_url: str,
) -> None:
    settings = make_settings(database_url=database_url)
    one, two = await client_for(settings), await client_for(settings)
    first, second = app_state(one), app_state(two)
    assert first.memory is not second.memory
    for text in BASE:
        await add(one, "vic", text.replace("Uma", "Vic"))
    assert await found(first, "vic", "What hot beverage should I offer her?")
    index = cached(first, "vic")

    passport = await add(two, "vic", "Vic's passport number is PX-55810")
    assert (await found(first, "vic", "passport PX-55810"))[0] == passport["content"]
    assert (await two.delete(f"/v1/memories/{passport['id']}")).status_code == 200
    assert passport["content"] not in await found(first, "vic", "passport PX-55810")

    # Written by a worker whose clock is a day behind: the count tells the index to look.
    late = utcnow() - timedelta(days=1)
    async with second.database.writing() as session:
        session.add(
            Memory(
                tenant_id="default",
                user_id="vic",
                content="Vic's gym badge is GB-3301",
                created_at=late,
                updated_at=late,
            )
        )
    assert (await found(first, "vic", "gym badge GB-3301"))[0] == "Vic's gym badge is GB-3301"
    assert cached(first, "vic") is index


async def test_one_tenants_index_never_holds_anothers_memories(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    database_url: str,
) -> None:
    client = await client_for(make_settings(database_url=database_url))
    state = app_state(client)

    async def store(tenant: str, content: str) -> None:
        async with state.database.writing() as session:
            session.add(Memory(tenant_id=tenant, user_id="sam", content=content))

    await store("tenant-a", "Sam's safe code is SC-1111")
    await store("tenant-b", "Sam's safe code is SC-2222")
    assert await found(state, "sam", "safe code", "tenant-a") == ["Sam's safe code is SC-1111"]
    assert await found(state, "sam", "safe code", "tenant-b") == ["Sam's safe code is SC-2222"]
    await store("tenant-b", "Sam's other safe code is SC-3333")
    assert await found(state, "sam", "safe code", "tenant-a") == ["Sam's safe code is SC-1111"]
    assert len(await found(state, "sam", "safe code", "tenant-b")) == 2
    assert await found(state, "sam", "safe code", "default") == []
    assert cached(state, "sam", "tenant-a") is not cached(state, "sam", "tenant-b")
    assert cached(state, "sam", "tenant-a").count == 1
