"""A summary without a model (seed 004's fallback): question/answer pairs and key points.

Used when the summarizer fails on a periodic summary: each user question is paired with the
first sentence of its answer, and sentences that carry numbers, decisions, preferences or
constraints become key points (typed like memories). Deterministic, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.db.models.summary import SummaryFact
from app.tokens.counter import text_of

__all__ = ["RuleSummary", "rule_based_summary"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_QUESTION_CHARS = 160
_ANSWER_CHARS = 200
_POINT_CHARS = 200
_MAX_POINTS = 6
# (memory type, words that make a sentence a key point of that type), first match wins
_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("decision", ("decided", "decide", "chose", "choose", "agreed", "will use", "going with")),
    ("preference", ("prefer", "like", "love", "hate", "dislike", "favorite", "favourite")),
    ("fact", ("must", "deadline", "always", "never", "need", "budget", "remember", "important")),
)
# One pattern per kind, compiled once: any of its words, whole (a sentence used to build and
# look up a pattern per word, twenty-two per sentence of every summarized message).
_KIND_PATTERNS = tuple(
    (kind, re.compile(r"\b(?:" + "|".join(re.escape(word) for word in words) + r")\b"))
    for kind, words in _KINDS
)
_NUMBER = re.compile(r"\d")


class _Message(Protocol):
    role: str
    turn_number: int

    @property
    def content(self) -> object: ...  # a string, a list of parts, or None


@dataclass(slots=True)
class RuleSummary:
    text: str
    facts: list[SummaryFact] = field(default_factory=list)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    return _SENTENCE.split(text, maxsplit=1)[0] if text else ""


def _kind(sentence: str) -> str | None:
    lowered = sentence.lower()
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(lowered):
            return kind
    return "fact" if _NUMBER.search(sentence) else None


def _key_points(messages: Sequence[_Message]) -> list[SummaryFact]:
    points: list[SummaryFact] = []
    seen: set[str] = set()
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue
        for sentence in _SENTENCE.split(" ".join(text_of(message.content).split())):
            kind = _kind(sentence)
            key = sentence.lower().strip(" .!?")
            if kind is None or len(key) < 12 or key in seen:
                continue
            seen.add(key)
            importance = 6 if message.role == "user" else 5
            points.append(
                {"fact": _clip(sentence, _POINT_CHARS), "type": kind, "importance": importance}
            )
    # The user's own statements first, then in conversation order; a bounded list.
    points.sort(key=lambda p: -int(p["importance"]))
    return points[:_MAX_POINTS]


def rule_based_summary(
    messages: Sequence[_Message], first_turn: int, last_turn: int
) -> RuleSummary:
    pairs: list[str] = []
    question: str | None = None
    for message in messages:
        text = text_of(message.content)
        if message.role == "user":
            if question is not None:
                pairs.append(f"- Q: {question}")
            question = _clip(text, _QUESTION_CHARS)
        elif message.role == "assistant" and text.strip() and question is not None:
            pairs.append(f"- Q: {question} A: {_clip(_first_sentence(text), _ANSWER_CHARS)}")
            question = None
    if question is not None:
        pairs.append(f"- Q: {question}")
    points = _key_points(messages)
    lines = [f"Rule-based summary of turns {first_turn}-{last_turn} (the summarizer failed)."]
    if pairs:
        lines += ["Questions and answers:", *pairs]
    if points:
        lines += ["Key points:", *(f"- ({p['type']}) {p['fact']}" for p in points)]
    return RuleSummary("\n".join(lines), points)
