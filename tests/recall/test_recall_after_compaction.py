"""Message recall after compaction (not only after trimming), and the end of the cross-session
search once a conversation has RECALL_CROSS_SESSION_BELOW messages, through the HTTP API with
the embedded model loaded, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.core.settings import Settings
from app.db.models import Conversation
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import SUMMARY, app_state, chat, drain, upstream_chats, words

PLANTED = "I parked the car on level 3 of the airport garage, spot B14."
ASK = "Where did I leave my vehicle?"
# Small enough that the post-response trigger (prompt > 0.8 x budget) compacts within a few turns.
# compaction_ratio 1: no compaction in the background, so the request that no longer fits
# compacts, and reports it.
SMALL = {"max_input_tokens": 600, "cache": {"enabled": False}, "compaction_ratio": 1.0}
TRIM = {"max_input_tokens": 700, "compaction_ratio": 1.0}
SIBLING = "My sister Hortensia lives in Lisbon and teaches piano."


def last_user_text(fake: FakeUpstream) -> str:
    sent = upstream_chats(fake)[-1]["messages"]
    text: str = [m for m in sent if m["role"] == "user"][-1]["content"]
    return text


async def test_compacted_detail_is_recalled(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
) -> None:
    settings = make_settings(
        database_url=database_url, summarizer_model="fake-summarizer", raw_tail_turns=2
    )
    client = await client_for(settings)
    # The summary knows nothing of the car: only recall can bring the detail back.
    fake_upstream.script("fake-summarizer", [SUMMARY] * 40)
    first = await chat(client, PLANTED, system="You are terse.", context=SMALL)
    conversation_id: str = first["conversation_id"]
    state = app_state(client)
    compactions = []
    for i in range(14):
        result = await chat(
            client, f"turn {i} " + words(20, "w"), conversation_id=conversation_id, context=SMALL
        )
        if result["context_utilization"]["compaction"]:
            compactions.append(result["context_utilization"]["compaction"])
        await drain(client)
        async with state.database.reading() as session:
            conversation = await session.get(Conversation, conversation_id)
            assert conversation is not None
            compacted_turn = conversation.compacted_turn
        if compacted_turn >= 4:  # turn 1 (the detail) well inside the summaries
            break
    assert compactions, "compaction never ran"
    assert compactions[0]["first_turn"] == 1  # the detail's turn went into a summary
    assert compacted_turn >= 4

    result = await chat(client, ASK, conversation_id=conversation_id, context=SMALL)
    utilization = result["context_utilization"]
    recalled = utilization["messages_recalled"]
    assert recalled, utilization
    assert recalled[0]["turn_number"] == 1  # behind the compaction boundary
    assert recalled[0]["sequence_number"] in (1, 2)  # the message or its echoed answer
    assert recalled[0]["conversation_id"] == conversation_id
    assert recalled[0]["similarity"] >= state.embedder.min_similarity  # type: ignore[union-attr]
    sent = upstream_chats(fake_upstream)[-1]["messages"]
    assert sent[1]["role"] == "system"
    assert sent[1]["content"].startswith("[MEMORY:EPISODIC]")  # the summary replaced turn 1
    assert not any("level 3" in str(m["content"]) for m in sent[:-1])
    text = last_user_text(fake_upstream)
    assert text.startswith("[RECALLED")
    assert text.endswith(f"[/RECALLED]\n\n{ASK}")
    assert "(turn 1, " in text
    assert "spot B14" in text
    assert utilization["tokens_used"] <= 600


async def _sibling_conversation(client: httpx.AsyncClient) -> str:
    first = await chat(client, SIBLING, user="ann")
    await drain(client)  # its vectors, stored in the background
    conversation_id: str = first["conversation_id"]
    return conversation_id


async def test_cross_session_search_stops_at_recall_cross_session_below(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    database_url: str,
) -> None:
    client = await client_for(
        make_settings(database_url=database_url, recall_cross_session_below=4)
    )
    other = await _sibling_conversation(client)
    first = await chat(client, "Good morning, a new day.", user="ann")
    conversation_id: str = first["conversation_id"]
    await drain(client)

    # 2 messages stored (< 4): the user's other conversation is searched.
    result = await chat(
        client, "Which city is my sibling based in?", conversation_id=conversation_id, user="ann"
    )
    recalled = result["context_utilization"]["messages_recalled"]
    assert [r["conversation_id"] for r in recalled][:1] == [other]
    assert "Hortensia" in last_user_text(fake_upstream)
    await drain(client)

    # 4 messages stored (= RECALL_CROSS_SESSION_BELOW): no longer; the history is not cut either.
    result = await chat(
        client, "In which town does my sister live?", conversation_id=conversation_id, user="ann"
    )
    utilization = result["context_utilization"]
    assert utilization["messages_excluded"] == 0
    assert utilization["messages_recalled"] == []
    assert last_user_text(fake_upstream) == "In which town does my sister live?"


@pytest.mark.parametrize(("below", "searched"), [(4, False), (1000, True)])
async def test_cut_conversation_searches_other_ones_only_below_the_threshold(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    below: int,
    searched: bool,
) -> None:
    client = await client_for(make_settings(raw_tail_turns=10**6, recall_cross_session_below=below))
    other = await _sibling_conversation(client)
    conversation_id = None
    for i in range(12):
        result = await chat(
            client,
            f"turn {i} " + words(30, "w"),
            conversation_id=conversation_id,
            user="ann",
            context=TRIM,
        )
        conversation_id = result["conversation_id"]
    await drain(client)

    result = await chat(
        client,
        "Which city is my sibling based in?",
        conversation_id=conversation_id,
        user="ann",
        context=TRIM,
    )
    utilization = result["context_utilization"]
    assert utilization["messages_excluded"] > 0  # cut: this conversation is searched either way
    from_other = [r for r in utilization["messages_recalled"] if r["conversation_id"] == other]
    assert bool(from_other) is searched
    assert ("Hortensia" in last_user_text(fake_upstream)) is searched
