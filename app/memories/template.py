"""How injected memories read (seed 003): a deployment-set template per line, with age.

The context block put next to the newest user message:

    [CONTEXT: 2026-11-23 15:00 UTC]
    Facts about the user:
    - [fact, importance 5, 2 days ago] favorite_drink: green tea
    Relevant memories:
    - [decision, importance 7, 3 days ago] Chose PostgreSQL for billing

``CONTEXTGATE_MEMORY_TEMPLATE`` sets one line; fields: {type} {importance} {age} {content}
{key} (empty for free-text memories) {date} (YYYY-MM-DD of the last update). With only the date
(``date_prefix``) the block is the first line alone. Memories' text is escaped like every data
block's (app.core.delimiters).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.core.delimiters import escape_delimiters

__all__ = ["DEFAULT_TEMPLATE", "Line", "age_text", "render_block", "render_line", "stamp"]

DEFAULT_TEMPLATE = "[{type}, importance {importance}, {age}] {content}"

FACTS_HEADER = "Facts about the user:"
MEMORIES_HEADER = "Relevant memories:"


@dataclass(frozen=True, slots=True)
class Line:
    """One fact or memory as the template sees it."""

    memory_type: str
    importance: int
    content: str
    updated_at: datetime | None = None
    key: str | None = None


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'} ago"


def age_text(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "unknown age"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0.0, (now - then).total_seconds())
    hours, days = seconds / 3600, seconds / 86400
    if hours < 1:
        return "just now"
    if days < 1:
        return _plural(int(hours), "hour")
    if days < 14:
        return _plural(int(days), "day")
    if days < 60:
        return _plural(int(days // 7), "week")
    if days < 365:
        return _plural(int(days // 30), "month")
    return _plural(int(days // 365), "year")


def render_line(template: str, line: Line, now: datetime) -> str:
    """One line; the memory's text (model- or tenant-written) on one line, with every prompt
    delimiter escaped (any case and spacing): it can neither close nor forge a data block."""
    content = escape_delimiters(" ".join(line.content.split()))
    key = escape_delimiters(" ".join((line.key or "").split()))
    if key:
        content = f"{key}: {content}"
    updated = line.updated_at
    return template.format(
        type=line.memory_type,
        importance=line.importance,
        age=age_text(updated, now),
        content=content,
        key=key,
        date=updated.strftime("%Y-%m-%d") if updated else "",
    )


def stamp(now: datetime) -> str:
    return f"[CONTEXT: {now.strftime('%Y-%m-%d %H:%M UTC')}]"


def render_block(
    facts: Sequence[Line], memories: Sequence[Line], now: datetime, template: str
) -> str:
    lines = [stamp(now)]
    if facts:
        lines.append(FACTS_HEADER)
        lines += [f"- {render_line(template, f, now)}" for f in facts]
    if memories:
        lines.append(MEMORIES_HEADER)
        lines += [f"- {render_line(template, m, now)}" for m in memories]
    return "\n".join(lines)
