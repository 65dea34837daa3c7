"""What of a user's long-term memory goes into this request, and the block that carries it.

Key/value facts first, in full (newest first), then the memories retrieved for the newest user
message (``context.memory_top_k``, ``context.memory_min_similarity`` per request), all within
``CONTEXTGATE_MEMORY_TOKEN_CAP``; each line rendered with the deployment's template. With
``date_prefix`` (setting or ``context.date_prefix``) the date and time are sent on every request,
also when no memory is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.settings import Settings
from app.db.models import Memory
from app.memories.index_refresh import IndexServices
from app.memories.repository import memory_repository
from app.memories.retrieval import RetrievalQuery, Retrieved, retrieve
from app.memories.template import Line, render_block, render_line
from app.protocol.chat import ContextOptions

__all__ = ["MemoryRequest", "MemorySelection", "date_prefix_wanted", "select_memories"]


@dataclass(slots=True)
class MemorySelection:
    facts: list[Memory] = field(default_factory=list)
    memories: list[Retrieved] = field(default_factory=list)
    facts_omitted: int = 0

    @property
    def empty(self) -> bool:
        return not self.facts and not self.memories

    def render(self, now: datetime, template: str) -> str:
        facts = [
            Line(f.memory_type, f.importance, f.content, f.updated_at, f.key) for f in self.facts
        ]
        memories = [
            Line(m.memory_type, m.importance, m.content, m.updated_at) for m in self.memories
        ]
        return render_block(facts, memories, now, template)

    def report(self) -> list[dict[str, Any]]:
        """``context_utilization.memories_injected``: facts (score 1: in full), then memories."""
        facts = [
            {"id": f.id, "key": f.key, "memory_type": f.memory_type, "score": 1.0}
            for f in self.facts
        ]
        memories = [
            {"id": m.id, "score": m.score, "similarity": m.similarity, "memory_type": m.memory_type}
            for m in self.memories
        ]
        return facts + memories


@dataclass(frozen=True, slots=True)
class MemoryRequest:
    """Whose memory, for which newest user message, with the request's ``context`` options;
    ``count`` measures a line against the memory token cap."""

    tenant_id: str
    user: str
    query: str
    options: ContextOptions
    count: Callable[[str], int]
    now: datetime


def date_prefix_wanted(settings: Settings, options: ContextOptions) -> bool:
    return settings.date_prefix if options.date_prefix is None else options.date_prefix


async def select_memories(
    services: IndexServices,
    settings: Settings,
    session: AsyncSession,
    wanted: MemoryRequest,
    notes: list[str],
) -> MemorySelection:
    template = settings.memory_template
    cap = settings.memory_token_cap
    count, now, options = wanted.count, wanted.now, wanted.options
    selection = MemorySelection()
    used = 0
    facts = await memory_repository.facts(session, wanted.tenant_id, wanted.user)
    for fact in facts:
        line = Line(fact.memory_type, fact.importance, fact.content, fact.updated_at, fact.key)
        tokens = count(f"- {render_line(template, line, now)}")
        if used + tokens > cap:
            selection.facts_omitted += 1
            continue
        selection.facts.append(fact)
        used += tokens
    if selection.facts_omitted:
        notes.append(
            f"memory: {selection.facts_omitted} user fact(s) did not fit the memory token cap"
        )
    if not wanted.query.strip():
        return selection
    floor = options.memory_min_similarity
    query = RetrievalQuery(
        wanted.tenant_id,
        wanted.user,
        wanted.query,
        count,
        top_k=options.memory_top_k,
        min_similarity=floor,
    )
    found = await retrieve(services, settings, session, query, notes)
    for memory in found:
        if floor is not None and memory.similarity < floor:
            continue
        line = Line(memory.memory_type, memory.importance, memory.content, memory.updated_at)
        tokens = count(f"- {render_line(template, line, now)}")
        if used + tokens > cap:
            continue
        selection.memories.append(memory)
        used += tokens
    return selection
