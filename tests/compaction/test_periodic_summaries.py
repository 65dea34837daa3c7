"""Periodic summaries (seed 004): one every N message pairs, beside compaction; a rule-based
summary, marked as such, when the summarizer fails."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import httpx

from app.compaction.rule_summary import _KINDS, _kind, rule_based_summary
from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import SUMMARY, app_state, chat, drain, upstream_chats

QUESTIONS = [
    "We decided to deploy on Fridays. Which region is cheapest?",
    "I prefer PostgreSQL over MySQL. How big should the pool be?",
    "The budget is 4000 euros per month. Can we afford replicas?",
    "What about backups?",
]


async def summaries(client: httpx.AsyncClient, conversation_id: str) -> list[dict[str, Any]]:
    detail = (await client.get(f"/v1/conversations/{conversation_id}")).json()
    found: list[dict[str, Any]] = detail["summaries"]
    return found


async def talk(
    client: httpx.AsyncClient, texts: list[str], context: dict[str, Any] | None = None
) -> tuple[str, list[int]]:
    """One pair per text; returns the conversation and the summary count after each pair."""
    conversation_id: str | None = None
    counts = []
    for text in texts:
        result = await chat(
            client, text, conversation_id=conversation_id, context=context,
            system="Be brief." if conversation_id is None else None,
        )  # fmt: skip
        conversation_id = result["conversation_id"]
        await drain(client)
        counts.append(len(await summaries(client, conversation_id)))
    assert conversation_id is not None
    return conversation_id, counts


async def test_a_summary_every_n_pairs_listed_and_not_injected(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(summarizer_model="fake-summarizer"))
    fake_upstream.script("fake-summarizer", [SUMMARY] * 2)
    texts = [f"pair {i}" for i in range(1, 8)]
    conversation_id, counts = await talk(client, texts, {"summary_every_pairs": 3})
    assert counts == [0, 0, 1, 1, 1, 2, 2]
    first, second = await summaries(client, conversation_id)
    assert (first["kind"], first["method"], first["model"]) == (
        "periodic",
        "llm",
        "fake-summarizer",
    )
    assert (first["first_turn"], first["last_turn"]) == (1, 3)
    assert (second["first_turn"], second["last_turn"]) == (4, 6)
    assert first["id"].startswith("sum_")  # stored as one plain INSERT: its id and defaults
    assert first["token_count"] > 0
    assert first["merged_into"] is None
    assert first["episodic"] == "The user counted turns and the assistant echoed each one."
    assert first["facts"][0]["fact"] == "The user is counting turns"
    summarizer_calls = upstream_chats(fake_upstream, "fake-summarizer")
    assert len(summarizer_calls) == 2
    assert "[turn 3] user: pair 3" in summarizer_calls[0]["messages"][1]["content"]
    assert "pair 4" not in summarizer_calls[0]["messages"][1]["content"]
    # Periodic summaries are a record, not the memory bundle: the raw history is still sent.
    sent = upstream_chats(fake_upstream)[-1]["messages"]
    assert [m["role"] for m in sent[:2]] == ["system", "user"]
    assert not any("[MEMORY:EPISODIC]" in str(m["content"]) for m in sent)
    assert len(sent) == 1 + 2 * 7 - 1


async def test_the_setting_sets_the_interval_and_zero_turns_it_off(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(
        make_settings(summarizer_model="fake-summarizer", summary_every_pairs=2)
    )
    fake_upstream.script("fake-summarizer", [SUMMARY] * 2)
    _, counts = await talk(client, ["a1", "a2", "a3", "a4"])
    assert counts == [0, 1, 1, 2]
    _, counts = await talk(client, ["b1", "b2", "b3"], {"summary_every_pairs": 0})
    assert counts == [0, 0, 0]
    assert app_state(client).settings.summary_every_pairs == 2


async def test_the_default_is_every_ten_pairs(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(summarizer_model="fake-summarizer"))
    fake_upstream.script("fake-summarizer", [SUMMARY])
    _, counts = await talk(client, [f"t{i}" for i in range(1, 11)])
    assert counts == [0] * 9 + [1]


async def test_a_failed_summarizer_stores_a_rule_based_summary_marked_as_such(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(summarizer_model="fake-summarizer"))
    fake_upstream.faults("fake-summarizer", [{"status": 500, "message": "summarizer down"}])
    conversation_id, counts = await talk(client, QUESTIONS[:3], {"summary_every_pairs": 3})
    assert counts == [0, 0, 1]
    [summary] = await summaries(client, conversation_id)
    assert summary["kind"] == "periodic"
    assert summary["method"] == "rule_based"
    assert summary["model"] is None
    assert summary["cost"] == 0
    text = summary["episodic"]
    assert text.startswith("Rule-based summary of turns 1-3 (the summarizer failed).")
    assert (
        "- Q: We decided to deploy on Fridays. Which region is cheapest? "
        "A: Echo: We decided to deploy on Fridays." in text
    )
    kinds = {(f["type"], f["fact"]) for f in summary["facts"]}
    assert ("decision", "We decided to deploy on Fridays.") in kinds
    assert ("preference", "I prefer PostgreSQL over MySQL.") in kinds
    assert ("fact", "The budget is 4000 euros per month.") in kinds
    assert summary["token_count"] > 0
    page = await client.get(f"/ui/conversations/{conversation_id}")  # the inspector marks it
    assert page.status_code == 200
    assert '<span class="badge">periodic</span> <span class="badge">rule-based</span>' in page.text

    # An answer that is not JSON is a failed summarizer too.
    fake_upstream.script("fake-summarizer", ["not json at all"])
    conversation_id, counts = await talk(client, QUESTIONS[:3], {"summary_every_pairs": 3})
    assert (await summaries(client, conversation_id))[0]["method"] == "rule_based"


def test_rule_based_summary_pairs_questions_with_answers_and_keeps_unanswered_ones() -> None:
    class M:
        def __init__(self, role: str, content: str, turn: int) -> None:
            self.role, self.content, self.turn_number = role, content, turn

    summary = rule_based_summary(
        [
            M("user", "Hello", 1),
            M("assistant", "Hi! How can I help?", 1),
            M("user", "Never deploy on Mondays, remember that.", 2),
            M("tool", "42 results", 2),
            M("user", "Thanks", 3),
        ],
        1,
        3,
    )
    lines = summary.text.splitlines()
    assert lines[1:5] == [
        "Questions and answers:",
        "- Q: Hello A: Hi!",
        "- Q: Never deploy on Mondays, remember that.",
        "- Q: Thanks",
    ]
    assert summary.facts == [
        {"fact": "Never deploy on Mondays, remember that.", "type": "fact", "importance": 6}
    ]


def test_key_point_kinds_match_any_listed_word_whole() -> None:
    """One compiled pattern per kind says what a search per word said: the first kind with a
    whole listed word, else "fact" for a number, else none."""

    def word_by_word(sentence: str) -> str | None:  # the per-word rule the patterns replace
        lowered = sentence.lower()
        for kind, words in _KINDS:
            if any(re.search(rf"\b{re.escape(word)}\b", lowered) for word in words):
                return kind
        return "fact" if re.search(r"\d", sentence) else None

    pieces = [
        "We decided", "I prefer", "likewise", "alike", "I like-it", "will use", "will user",
        "going with", "going without", "needs", "NEED", "never!", "budget:", "the 3rd",
        "favourite", "hates", "(must)", "remembering", "Important.", "chose", "choosen",
        "we agreed", "disliked", "plain words", "", " ",
    ]  # fmt: skip
    sentences = [*pieces, *(f"{a} {b}" for a in pieces for b in pieces)]
    random.seed(7)
    sentences += [" ".join(random.choices(pieces, k=4)) for _ in range(500)]
    for sentence in sentences:
        assert _kind(sentence) == word_by_word(sentence), sentence
