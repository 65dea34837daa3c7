"""Message vectors for recall, embedded after the turn: those of another embedder are
recomputed, and only the messages recall may search are embedded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import select

from app.core.settings import Settings
from app.db.models import MessageVector
from app.embedders.embedded import MINILM_NAME, WORDLLAMA_NAME
from tests.memories.helpers import app_state, chat, drain


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
