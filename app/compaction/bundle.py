"""The memory bundle: active compaction summaries rendered in one deterministic format.

    [MEMORY:EPISODIC]
    (turns 1-12) <episodic text>
    [MEMORY:SEMANTIC]
    - (preference, importance 8) <fact>

It goes right after the system prompt; it changes only when a compaction happens, so the prompt
prefix stays cacheable between compactions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.db.models.summary import SummaryFact

__all__ = ["Bundle", "SummaryView", "render_bundle", "summary_tokens"]

EPISODIC_HEADER = "[MEMORY:EPISODIC]"
SEMANTIC_HEADER = "[MEMORY:SEMANTIC]"


@dataclass(frozen=True, slots=True)
class SummaryView:
    id: str
    first_turn: int
    last_turn: int
    episodic: str
    facts: Sequence[SummaryFact] = ()


@dataclass(slots=True)
class Bundle:
    text: str = ""
    summaries_included: list[str] = field(default_factory=list)
    summaries_omitted: int = 0
    facts_included: int = 0

    @property
    def empty(self) -> bool:
        return not self.text


def _episode_line(summary: SummaryView) -> str:
    text = " ".join(summary.episodic.split())
    return f"(turns {summary.first_turn}-{summary.last_turn}) {text}"


def _fact_line(fact: SummaryFact) -> str:
    kind = fact.get("type", "fact")
    importance = fact.get("importance", 5)
    text = " ".join(str(fact.get("fact", "")).split())
    return f"- ({kind}, importance {importance}) {text}"


def summary_tokens(summary: SummaryView, count: Callable[[str], int]) -> int:
    return count(_episode_line(summary)) + sum(count(_fact_line(f)) for f in summary.facts)


def _facts(summaries: Sequence[SummaryView]) -> list[SummaryFact]:
    """Facts of every summary, newest statement winning, most important first (stable)."""
    seen: dict[str, int] = {}
    ordered: list[SummaryFact] = []
    for summary in summaries:
        for fact in summary.facts:
            key = " ".join(str(fact.get("fact", "")).lower().split())
            if not key:
                continue
            if key in seen:
                ordered[seen[key]] = fact
            else:
                seen[key] = len(ordered)
                ordered.append(fact)
    return sorted(ordered, key=lambda f: -int(f.get("importance", 5)))


def render_bundle(
    summaries: Sequence[SummaryView], *, cap_tokens: int, count: Callable[[str], int]
) -> Bundle:
    """Render the newest episodes and the most important facts that fit in ``cap_tokens``.

    Episodes get up to two thirds of the cap (newest kept first, printed oldest first); facts
    get what is left. Whatever does not fit is counted in ``summaries_omitted``.
    """
    bundle = Bundle()
    if not summaries or cap_tokens <= 0:
        return bundle
    headers = count(EPISODIC_HEADER) + count(SEMANTIC_HEADER) + 2
    room = cap_tokens - headers
    episode_room = room * 2 // 3
    episodes: list[tuple[SummaryView, str]] = []
    used = 0
    for summary in reversed(summaries):
        line = _episode_line(summary)
        tokens = count(line) + 1
        if used + tokens > episode_room:
            break
        episodes.append((summary, line))
        used += tokens
    episodes.reverse()
    bundle.summaries_omitted = len(summaries) - len(episodes)
    fact_lines: list[str] = []
    for fact in _facts(summaries):
        line = _fact_line(fact)
        tokens = count(line) + 1
        if used + tokens > room:
            break
        fact_lines.append(line)
        used += tokens
    if not episodes and not fact_lines:
        bundle.summaries_omitted = len(summaries)
        return bundle
    lines = [EPISODIC_HEADER, *(line for _, line in episodes), SEMANTIC_HEADER, *fact_lines]
    bundle.text = "\n".join(lines)
    bundle.summaries_included = [summary.id for summary, _ in episodes]
    bundle.facts_included = len(fact_lines)
    return bundle
