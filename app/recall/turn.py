"""Message recall in a turn: after assembly, in the room the history fit left.

The pipeline calls ``recall_for_turn`` (through ``MemoryContext.recall_messages``) between
assembly and ``MemoryContext.apply``. Recalled messages never evict history: they take what the
fit left of the budget (the history cut is quantized, compaction leaves a margin), up to
``recall_token_cap``. Recall runs when the request has memory on and either
the history sent is cut (compacted or trimmed: this conversation's missing messages are
searched), or the prompt sends cleared tool results as placeholders (app/context/cache_fit.py:
those results are searched, and one a question needs comes back in full, marked with its tool
and call id, truncated only to fit the room), or the request names a ``user`` whose
conversation is still short (their other conversations are searched: seed 004's cross-session
rule).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field

from app.context.assembler import AssembledContext
from app.context.history import HistoryWindow
from app.core.settings import Settings
from app.db.models import Conversation
from app.embedders.embedder import EmbeddingFailed
from app.protocol.chat import ChatCompletionRequest
from app.recall.render import Recalled, render_recalled
from app.recall.search import RecallQuery, ToolScope, search
from app.recall.services import RecallServices
from app.tokens.counter import MESSAGE_OVERHEAD, TokenCounter, text_of

__all__ = ["RecallResult", "RecallTurn", "recall_for_turn"]

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 6  # generous: a recalled tool result is loaded this long, then fitted
MIN_TOOL_CHARS = 200  # a tool result cut shorter than this to fit is left out instead
LAZY_TOOL_RESULTS = 4  # cleared results a request embeds itself (~70 ms each with MiniLM)


@dataclass(slots=True)
class RecallResult:
    block: str = ""
    tokens: int = 0
    recalled: list[Recalled] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RecallTurn:
    """The turn recall works for: its request, conversation, history window and assembled
    prompt; ``room``: the tokens the fit left; ``boundary_sequence``: where compaction moved
    the history's start; ``message_overhead``: the block is a message of its own."""

    request: ChatCompletionRequest
    tenant_id: str
    conversation: Conversation | None  # None: a new conversation
    conversation_id: str
    window: HistoryWindow
    assembled: AssembledContext
    room: int
    boundary_sequence: int
    message_overhead: bool


def _enabled(services: RecallServices, settings: Settings, request: ChatCompletionRequest) -> bool:
    return bool(
        services.embedder is not None
        and settings.message_recall
        and request.context.memory
        and settings.recall_token_cap > 0
    )


async def recall_for_turn(
    services: RecallServices,
    settings: Settings,
    tokens: TokenCounter,
    turn: RecallTurn,
    result: RecallResult,
) -> None:
    """Search and render the recalled messages into ``result`` (within ``turn.room`` tokens)."""
    embedder = services.embedder
    request, window, assembled = turn.request, turn.window, turn.assembled
    if not _enabled(services, settings, request) or embedder is None or turn.room <= 0:
        return
    users = [m for m in window.current if m.role == "user"]
    query = text_of(users[-1].content).strip() if users else ""
    if not query:
        return
    conversation = turn.conversation
    system_count = conversation.system_prompt_count if conversation is not None else 0
    utilization = assembled.utilization
    kept = utilization.messages_included - len(window.system) - len(window.current)
    current_seq = window.current[0].sequence_number if window.current else 0
    first_kept = (
        window.history[-kept].sequence_number if 0 < kept <= len(window.history) else current_seq
    )
    if assembled.cache is not None:
        first_kept = (
            assembled.cache.kept[0].sequence_number if assembled.cache.kept else current_seq
        )
    min_similarity = (
        embedder.min_similarity
        if request.context.memory_min_similarity is None
        else request.context.memory_min_similarity
    )
    tool_bar = min_similarity + settings.recall_tool_similarity_margin
    tools = _tool_scope(settings, turn, tool_bar)
    cut = utilization.messages_excluded > 0 or turn.boundary_sequence > system_count
    short = request.user is not None and (
        conversation is None or conversation.message_count < settings.recall_cross_session_below
    )
    if not cut and not short and not tools.placeholders:
        return
    wanted = RecallQuery(
        tenant_id=turn.tenant_id,
        user=request.user,
        conversation_id=turn.conversation_id,
        query=query,
        first_sequence=system_count,
        before_sequence=first_kept if cut else system_count,
        top_k=settings.recall_top_k,
        min_similarity=min_similarity,
        cross_session_below=settings.recall_cross_session_below,
        max_chars=settings.recall_max_chars,
        tools=tools,
    )
    try:
        async with services.database.reading() as session:
            found = await search(services, embedder, session, wanted, result.notes)
    except EmbeddingFailed as exc:
        result.notes.append(f"message recall: embeddings failed ({exc})")
        return
    except Exception as exc:  # recall must never fail the request
        logger.warning("message recall failed", exc_info=True)
        result.notes.append(f"message recall failed ({type(exc).__name__}); none recalled")
        return
    if not found:
        return  # nothing similar enough: nothing to say (not "no room")
    _fit(tokens, turn, found, result)


def _tool_scope(settings: Settings, turn: RecallTurn, min_similarity: float) -> ToolScope:
    """The cleared tool results this prompt sends as placeholders (sequence numbers), and the
    similarity one must reach to come back."""
    fit = turn.assembled.cache
    if fit is None:
        return ToolScope()
    boundary = fit.state.cleared_sequence
    raw = {m.sequence_number: m for m in turn.window.history if m.role == "tool"}
    placeholders = frozenset(
        m.sequence_number
        for m in fit.kept
        if m.role == "tool"
        and m.sequence_number < boundary
        and m.sequence_number in raw
        and raw[m.sequence_number].content != m.content
    )
    return ToolScope(
        placeholders=placeholders,
        cleared_before=boundary,
        exclude=frozenset(settings.cache_exclude_tools),
        max_chars=max(turn.room, 0) * CHARS_PER_TOKEN,
        lazy_limit=LAZY_TOOL_RESULTS,
        min_similarity=min_similarity,
    )


def _fit(
    tokens: TokenCounter, turn: RecallTurn, found: list[Recalled], result: RecallResult
) -> None:
    """The block within ``turn.room``: the least similar left out first, a tool result last in
    the list cut shorter (down to ``MIN_TOOL_CHARS``) before it is left out."""
    model, room = turn.request.model, turn.room
    conversation_id, message_overhead = turn.conversation_id, turn.message_overhead
    truncated = False
    while found:
        block = render_recalled(found, conversation_id)
        used = tokens.count_text(block, model) + 2
        if message_overhead:
            used += MESSAGE_OVERHEAD
        if used <= room:
            result.block, result.tokens, result.recalled = block, used, found
            if truncated:
                result.notes.append(
                    "message recall: a recalled tool result was cut short to fit recall_token_cap"
                )
            return
        last = found[-1]
        if last.role == "tool" and len(last.text) > MIN_TOOL_CHARS:
            own = max(1, tokens.count_text(last.text, model))
            over = used - room + 8
            keep = int(len(last.text) * (1 - over / own)) if over < own else 0
            if keep >= MIN_TOOL_CHARS:
                text = last.text[: min(keep, len(last.text) - 1)].rstrip() + "…"
                found = [*found[:-1], dataclasses.replace(last, text=text)]
                truncated = True
                continue
        found = found[:-1]
    result.notes.append("message recall: no room left for the recalled messages")
