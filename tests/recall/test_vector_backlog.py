"""A long history brought at once is embedded in the background at a bounded rate, and the
requests that continue it meanwhile search what is embedded so far and say so in ``notes``
(issue 26, point 2; app/recall/backlog.py, app/recall/search.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import func, select

import app.recall.backlog as backlog_module
from app.core.settings import Settings
from app.db.models import MessageVector
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import SUMMARY, app_state, drain

HISTORY = 1_200  # far more than one batch of the backlog


def _history() -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are helpful."}]
    for index in range(1, HISTORY):
        role = "user" if index % 2 else "assistant"
        messages.append({"role": role, "content": f"message {index} about the harbour tides"})
    messages.append({"role": "user", "content": "And the tides today?"})
    return messages


def _backlog_notes(body: dict[str, Any]) -> list[str]:
    notes: list[str] = body["context_utilization"]["notes"]
    return [n for n in notes if n.startswith("message recall: searched the")]


async def test_an_imported_history_is_embedded_in_the_background_while_requests_go_on(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batches: list[int] = []
    pauses: list[float] = []
    embed = backlog_module.embed_messages

    async def counting_embed(embedder: Any, missing: list[Any], excluded: set[int]) -> Any:
        batches.append(len(missing))
        return await embed(embedder, missing, excluded)

    async def recorded_sleep(seconds: float) -> None:
        pauses.append(seconds)
        await asyncio.sleep(seconds)

    monkeypatch.setattr(backlog_module, "embed_messages", counting_embed)
    monkeypatch.setattr(backlog_module, "asyncio", SimpleNamespace(sleep=recorded_sleep))
    fake_upstream.script("fake-summarizer", [SUMMARY] * 50)
    settings = make_settings(
        embedder="wordllama",
        summarizer_model="fake-summarizer",
        memory_extraction_mode="off",
        summary_every_pairs=0,
        max_messages=HISTORY + 10,
    )
    client = await client_for(settings)
    state = app_state(client)

    first = await client.post("/v1/chat/completions", json={"model": "m", "messages": _history()})
    assert first.status_code == 200, first.text
    conversation_id = first.json()["conversation_id"]
    follow = {
        "model": "m",
        "conversation_id": conversation_id,
        "messages": [{"role": "user", "content": "When is high tide at the harbour?"}],
    }
    second = await client.post("/v1/chat/completions", json=follow)
    assert second.status_code == 200, second.text
    # Answered while the backlog is still being embedded: the request did not wait for it,
    # searched the part embedded so far, and says so.
    (note,) = _backlog_notes(second.json())
    searched = int(note.split("searched the ")[1].split()[0])
    assert searched < HISTORY
    assert "being embedded in the background" in note

    await drain(client)
    async with state.database.reading() as session:
        embedded = await session.scalar(
            select(func.count(MessageVector.id)).where(
                MessageVector.conversation_id == conversation_id
            )
        )
    assert embedded is not None
    assert embedded >= HISTORY  # every stored message of the import, and the turns since
    # A bounded rate: batches of at most BACKLOG_BATCH, each followed by a pause as long as
    # it took (BACKLOG_DUTY 0.5), one batch at a time.
    assert max(batches) <= backlog_module.BACKLOG_BATCH
    assert len(batches) >= HISTORY // backlog_module.BACKLOG_BATCH
    assert len(pauses) >= len(batches) - 2
    assert all(p >= 0 for p in pauses)

    third = await client.post("/v1/chat/completions", json=follow)
    assert third.status_code == 200, third.text
    assert _backlog_notes(third.json()) == []  # caught up: nothing to say
