"""Semantic retrieval with the embedded model (loaded from the package, no network) and message
recall, through the HTTP API, on SQLite and PostgreSQL: paraphrased questions find their
memory, thresholds keep weak matches out, trimmed-away messages come back marked as recalled,
a user's other conversations are searched, and never another user's or tenant's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import select

from app.core.settings import Settings
from app.db.models import Memory, MessageVector
from app.embedders.embedded import MINILM_NAME, MiniLMEmbedder
from app.embedders.embedder import decode_vector
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import app_state, chat, drain, upstream_chats, words

PLANTED = "I parked the car on level 3 of the airport garage, spot B14."
ASK = "Where did I leave my vehicle?"
TRIM = {"max_input_tokens": 700, "compaction_ratio": 1.0}


async def add(client: httpx.AsyncClient, user: str, content: str, **extra: Any) -> dict[str, Any]:
    response = await client.post("/v1/memories", json={"user": user, "content": content, **extra})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def last_user_text(fake: FakeUpstream) -> str:
    sent = upstream_chats(fake)[-1]["messages"]
    text: str = [m for m in sent if m["role"] == "user"][-1]["content"]
    return text


async def test_paraphrased_question_finds_its_memory_with_the_embedded_model(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
) -> None:
    client = await client_for(make_settings(database_url=database_url))
    state = app_state(client)
    assert isinstance(state.embedder, MiniLMEmbedder)  # the default with its weights installed
    tea = await add(client, "zoe", "Alice drinks green tea every morning", memory_type="preference")
    await add(client, "zoe", "Zoe's car is a red Volvo")
    await add(client, "zoe", "Zoe works as a nurse in a children's hospital")
    await add(client, "yann", "Yann drinks green tea every morning")

    result = await chat(client, "What hot beverage should I offer her?", user="zoe")
    injected = result["context_utilization"]["memories_injected"]
    assert injected[0]["id"] == tea["id"]  # BM25 alone shares no word with it
    assert "green tea" in last_user_text(fake_upstream)
    assert "Yann" not in last_user_text(fake_upstream)
    assert state.embedder.load_seconds is not None  # loaded once, from the package

    await drain(client)  # vectors computed at the first retrieval are stored in the background
    async with state.database.reading() as session:
        rows = (await session.execute(select(Memory).where(Memory.user_id == "zoe"))).scalars()
        stored = list(rows)
    assert {m.embedding_model for m in stored} == {MINILM_NAME}
    # float32 blobs, the vectors the index computed (unit length)
    vectors = [decode_vector(m.embedding) for m in stored if m.embedding is not None]
    assert len(vectors) == len(stored)
    assert all(v.shape == (state.embedder.dimensions,) for v in vectors)
    assert all(abs(float(v @ v) - 1.0) < 1e-5 for v in vectors)


async def test_similarity_threshold_keeps_weak_matches_out_but_exact_ids_win(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(memory_min_similarity=0.95))
    await add(client, "kim", "Kim drinks green tea every morning")
    invoice = await add(client, "kim", "Invoice INV-20931 was paid on 3 May")
    result = await chat(client, "What hot beverage should I offer her?", user="kim")
    assert result["context_utilization"]["memories_injected"] == []
    assert last_user_text(fake_upstream) == "What hot beverage should I offer her?"
    # A strong lexical match (a rare id) passes without the cosine.
    result = await chat(client, "Was INV-20931 paid?", user="kim")
    assert [m["id"] for m in result["context_utilization"]["memories_injected"]] == [invoice["id"]]

    # Default threshold: an unrelated question injects nothing.
    client = await client_for(make_settings())
    await add(client, "lea", "Lea drinks green tea every morning")
    result = await chat(client, "Explain quicksort complexity", user="lea")
    assert result["context_utilization"]["memories_injected"] == []


async def test_bm25_only_when_chosen(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> None:
    client = await client_for(make_settings(embedder="bm25"))
    assert app_state(client).embedder is None
    await add(client, "max", "Max drinks green tea every morning")
    result = await chat(client, "What hot beverage should I offer him?", user="max")
    assert result["context_utilization"]["memories_injected"] == []
    result = await chat(client, "Which tea does Max drink?", user="max")
    assert len(result["context_utilization"]["memories_injected"]) == 1
    assert result["context_utilization"]["messages_recalled"] == []


async def _long_conversation(client: httpx.AsyncClient, user: str | None) -> str:
    first = await chat(client, PLANTED, user=user, context=TRIM)
    conversation_id: str = first["conversation_id"]
    for i in range(12):
        await chat(
            client,
            f"turn {i} " + words(30, "w"),
            conversation_id=conversation_id,
            user=user,
            context=TRIM,
        )
    await drain(client)
    return conversation_id


async def test_trimmed_message_is_recalled_after_the_prefix(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
) -> None:
    settings = make_settings(database_url=database_url, raw_tail_turns=10**6)
    client = await client_for(settings)
    conversation_id = await _long_conversation(client, None)
    result = await chat(client, ASK, conversation_id=conversation_id, context=TRIM)
    utilization = result["context_utilization"]
    assert utilization["messages_excluded"] > 0  # the history was cut
    recalled = utilization["messages_recalled"]
    assert recalled
    assert recalled[0]["sequence_number"] in (0, 1)
    assert recalled[0]["turn_number"] == 1
    assert recalled[0]["conversation_id"] == conversation_id
    assert recalled[0]["similarity"] >= app_state(client).embedder.min_similarity  # type: ignore[union-attr]
    sent = upstream_chats(fake_upstream)[-1]["messages"]
    assert PLANTED not in [m["content"] for m in sent]  # not in the history sent...
    text = last_user_text(fake_upstream)  # ...but recalled next to the newest message
    assert text.startswith("[RECALLED")
    assert text.endswith(f"[/RECALLED]\n\n{ASK}")
    assert "(turn 1, " in text
    assert "level 3" in text
    assert utilization["tokens_used"] <= 700
    # The stored message is still the client's own text.
    detail = (await client.get(f"/v1/conversations/{conversation_id}")).json()
    assert detail["messages"][-2]["content"] == ASK

    # An unrelated question recalls nothing (the similarity threshold).
    result = await chat(
        client, "Explain quicksort complexity", conversation_id=conversation_id, context=TRIM
    )
    assert result["context_utilization"]["messages_recalled"] == []
    # Vectors are stored with a row per message, computed in the background.
    await drain(client)
    async with app_state(client).database.reading() as session:
        vectors = list(
            (
                await session.execute(
                    select(MessageVector).where(MessageVector.conversation_id == conversation_id)
                )
            ).scalars()
        )
    assert len(vectors) == 2 * 15
    assert all(v.embedding_model == MINILM_NAME for v in vectors)


async def test_recall_across_one_users_conversations_never_other_users_or_tenants(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
) -> None:
    client = await client_for(make_settings(database_url=database_url, master_key="sk-master"))
    admin = {"Authorization": "Bearer sk-master"}
    keys = []
    for name in ("a", "b"):
        response = await client.post("/v1/keys", json={"name": name}, headers=admin)
        keys.append({"Authorization": f"Bearer {response.json()['key']}"})

    async def ask(text: str, user: str, headers: dict[str, str]) -> dict[str, Any]:
        body = {
            "model": "fake-model",
            "messages": [{"role": "user", "content": text}],
            "user": user,
        }
        response = await client.post("/v1/chat/completions", json=body, headers=headers)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    first = await ask("My sister Hortensia lives in Lisbon and teaches piano.", "ann", keys[0])
    await drain(client)
    # A new conversation of the same user: the other conversation is searched.
    result = await ask("Which city is my sibling based in?", "ann", keys[0])
    recalled = result["context_utilization"]["messages_recalled"]
    assert recalled
    assert recalled[0]["conversation_id"] == first["conversation_id"]
    assert "(another conversation, turn 1, " in last_user_text(fake_upstream)
    assert "Hortensia" in last_user_text(fake_upstream)
    # Another user of the same tenant, and the same user name under another tenant: nothing.
    for user, headers in (("bob", keys[0]), ("ann", keys[1])):
        result = await ask("Which city is my sibling based in?", user, headers)
        assert result["context_utilization"]["messages_recalled"] == []
        assert "Hortensia" not in last_user_text(fake_upstream)
    # Memory off: no recall either.
    body = {
        "model": "fake-model",
        "user": "ann",
        "context": {"memory": False},
        "messages": [{"role": "user", "content": "Which city is my sibling based in?"}],
    }
    response = await client.post("/v1/chat/completions", json=body, headers=keys[0])
    assert response.json()["context_utilization"]["messages_recalled"] == []
