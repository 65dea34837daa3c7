"""Memories without vectors (imported in bulk, or from before the embedder changed): a request
embeds only what it can afford, the rest is embedded in the background and stored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
from sqlalchemy import select

from app.db.models import Memory
from app.embedders.embedded import MiniLMEmbedder
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
