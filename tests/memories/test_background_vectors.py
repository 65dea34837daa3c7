"""Memories without vectors (imported in bulk, or from before the embedder changed): a request
embeds only what it can afford, the rest is embedded in the background and stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np
from sqlalchemy import select

from app.core.settings import Settings
from app.db.models import Memory, MessageVector
from app.memories.embedded import MINILM_NAME, WORDLLAMA_NAME, MiniLMEmbedder
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import app_state, chat, drain

TOPICS = ["tea", "bikes", "chess", "rust", "jazz", "sailing", "bread", "birds", "maps", "clay"]


async def test_a_request_embeds_a_batch_and_the_background_the_rest(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    state = app_state(client)
    embedder = state.embedder
    assert isinstance(embedder, MiniLMEmbedder)
    for i in range(100):
        body = {"user": "bulk", "content": f"Note {i}: the user once read about {TOPICS[i % 10]}"}
        assert (await client.post("/v1/memories", json=body)).status_code == 200
    await drain(client)
    batches: list[int] = []
    original = embedder.embed

    async def counting(texts: Sequence[str]) -> np.ndarray:
        batches.append(sum(text.startswith("Note ") for text in texts))  # memories only
        return await original(texts)

    embedder.embed = counting  # type: ignore[method-assign]
    try:
        result: dict[str, Any] = await chat(client, "Tell me about sailing", user="bulk")
        await drain(client)
    finally:
        embedder.embed = original  # type: ignore[method-assign]
    assert result["choices"][0]["message"]["content"]
    memory_batches = [size for size in batches if size]  # not the query, not the messages
    assert memory_batches[0] == embedder.request_batch < 100
    assert sum(memory_batches) == 100  # each memory embedded once
    async with state.database.reading() as session:
        rows = (await session.execute(select(Memory).where(Memory.user_id == "bulk"))).scalars()
        stored = list(rows)
    assert len(stored) == 100
    assert all(m.embedding is not None and m.embedding_model == embedder.name for m in stored)
    # The next request finds every vector in place and embeds only its query.
    batches.clear()
    embedder.embed = counting  # type: ignore[method-assign]
    try:
        await chat(client, "Which birds did I read about?", user="bulk")
    finally:
        embedder.embed = original  # type: ignore[method-assign]
    assert not any(batches)


async def test_message_vectors_of_another_embedder_are_recomputed(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    database_url: str,
) -> None:
    before = await client_for(make_settings(database_url=database_url, embedder="wordllama"))
    first = await chat(before, "I keep the spare key under the blue flowerpot.", user="kai")
    conversation_id = first["conversation_id"]
    await drain(before)
    assert await vector_models(before, conversation_id) == {WORDLLAMA_NAME}

    after = await client_for(make_settings(database_url=database_url, embedder="minilm"))
    await chat(after, "Thanks.", conversation_id=conversation_id, user="kai")
    await drain(after)
    assert await vector_models(after, conversation_id) == {MINILM_NAME}
    async with app_state(after).database.reading() as session:
        rows = await session.execute(
            select(MessageVector.message_id).where(MessageVector.conversation_id == conversation_id)
        )
        assert len(list(rows)) == 4  # one row per message, the old ones replaced


async def vector_models(client: httpx.AsyncClient, conversation_id: str) -> set[str | None]:
    async with app_state(client).database.reading() as session:
        rows = await session.execute(
            select(MessageVector.embedding_model).where(
                MessageVector.conversation_id == conversation_id
            )
        )
        return {row[0] for row in rows}


async def test_messages_are_embedded_only_where_recall_may_search_them(
    client: httpx.AsyncClient,
) -> None:
    # A short conversation without a `user`: never searched by recall, never embedded.
    anonymous = await chat(client, "Hello, a short question about tea.")
    await chat(client, "And one more.", conversation_id=anonymous["conversation_id"])
    await drain(client)
    assert await vector_models(client, anonymous["conversation_id"]) == set()
    # With a `user`: the user's other conversations may search it (cross-session recall).
    named = await chat(client, "Hello, a short question about tea.", user="una")
    await drain(client)
    assert await vector_models(client, named["conversation_id"]) == {MINILM_NAME}
    # Past half the budget: its whole backlog, ahead of the first cut.
    long_text = "We talked about the tea garden and its terraces. " * 60
    near = await chat(client, long_text, context={"max_input_tokens": 1000})
    assert near["context_utilization"]["tokens_used"] >= 500
    await drain(client)
    assert await vector_models(client, near["conversation_id"]) == {MINILM_NAME}
