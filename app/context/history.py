"""Load the part of a conversation a request can use: system prompt, history tail, current turn.

The conversation row carries running counters (message count, token positions of the system
prompt and of the newest user message), so the window is found without reading the history:
one range query loads the system prompt and the tail from the cut on, whatever the length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.context.budget import TokenBudget
from app.context.fit import history_cut
from app.conversations.cache_state import CacheState
from app.conversations.messages import ConversationMessage, attach_reasoning_steps
from app.conversations.service import ResolvedConversation
from app.conversations.tail import stored_tail

__all__ = ["HistoryWindow", "TurnShape", "WindowSpec", "load_history_window", "measure_turn"]

_SYSTEM_ROLES = ("system", "developer")


@dataclass(slots=True)
class HistoryWindow:
    system: list[ConversationMessage] = field(default_factory=list)
    history: list[ConversationMessage] = field(default_factory=list)
    current: list[ConversationMessage] = field(default_factory=list)
    region_start: int = 0
    region_end: int = 0
    region_count: int = 0
    region_first: int = 0  # sequence number of the region's first message
    current_first: int = 0  # sequence number of the current turn's first message

    @property
    def system_tokens(self) -> int:
        return sum(m.token_count for m in self.system)

    @property
    def current_tokens(self) -> int:
        return sum(m.token_count for m in self.current)


def _number_new(resolved: ResolvedConversation, new: list[ConversationMessage]) -> None:
    """Give the new messages the positions they will take when stored."""
    conversation = resolved.conversation
    sequence = conversation.message_count if conversation else 0
    position = conversation.total_tokens if conversation else 0
    for message in new:
        message.sequence_number = sequence
        message.start_tokens = position
        message.stored = False
        sequence += 1
        position += message.token_count


@dataclass(frozen=True, slots=True)
class TurnShape:
    """Where the system prompt and the current turn are, and their tokens, counted once."""

    system_count: int
    system_tokens: int
    current_seq: int  # first message of the current turn (the newest user message)
    current_start: int  # its absolute token position
    current_tokens: int  # the whole current turn, stored part included


def measure_turn(resolved: ResolvedConversation, new: list[ConversationMessage]) -> TurnShape:
    """Number the new messages and find the system prompt and current turn (no query)."""
    _number_new(resolved, new)
    conversation = resolved.conversation
    stored_count = conversation.message_count if conversation else 0

    if conversation is not None and stored_count:
        system_count = conversation.system_prompt_count
        system_tokens = conversation.system_prompt_tokens
    else:
        system_count = 0
        system_tokens = 0
        for message in new:
            if message.role not in _SYSTEM_ROLES:
                break
            system_count += 1
            system_tokens += message.token_count

    new_user = [m for m in new if m.role == "user"]
    if new_user:
        current_seq, current_start = new_user[-1].sequence_number, new_user[-1].start_tokens
    elif conversation is not None and conversation.last_user_sequence is not None:
        current_seq = conversation.last_user_sequence
        current_start = conversation.last_user_start_tokens
    elif new:
        current_seq, current_start = new[0].sequence_number, new[0].start_tokens
    else:
        current_seq = stored_count
        current_start = conversation.total_tokens if conversation else 0
    current_seq = max(current_seq, system_count)
    current_start = max(current_start, system_tokens)
    # The stored part of the current turn (a tool-result continuation) plus the new part.
    stored_current = (conversation.total_tokens - current_start) if conversation else 0
    new_current = sum(m.token_count for m in new if m.sequence_number >= current_seq)
    return TurnShape(
        system_count=system_count,
        system_tokens=system_tokens,
        current_seq=current_seq,
        current_start=current_start,
        current_tokens=max(0, stored_current) + new_current,
    )


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """What a request's window is loaded with.

    ``shape`` is ``measure_turn``'s; history gets at most ``budget.history_room``, and messages
    before the cut that room implies are never loaded. ``boundary_tokens``/
    ``boundary_sequence`` mark a compaction boundary: history starts there (older turns are
    carried by summaries), at an absolute token position. ``artifact_turns``: the last N turns
    are loaded whole even before the cut, so that their tool results can become (shrunk)
    artifacts; the history fit still decides what is sent. ``cache_state``: the cache-aware
    fit's stored cut; history is loaded from it on, whole (the previous prompt fitted from
    there, so this is bounded by the budget plus what its placeholders save).
    """

    shape: TurnShape
    budget: TokenBudget
    chunk_tokens: int
    boundary_tokens: int = 0
    boundary_sequence: int = 0
    artifact_turns: int = 0
    cache_state: CacheState | None = None


async def load_history_window(
    session: AsyncSession | None,
    resolved: ResolvedConversation,
    new: list[ConversationMessage],
    spec: WindowSpec,
) -> HistoryWindow:
    """Split stored + new messages into system prompt, history candidates and current turn
    (see ``WindowSpec``)."""
    conversation = resolved.conversation
    stored_count = conversation.message_count if conversation else 0
    shape, cache_state = spec.shape, spec.cache_state
    system_count, system_tokens = shape.system_count, shape.system_tokens
    current_seq, current_start = shape.current_seq, shape.current_start

    room = spec.budget.history_room
    region_start = max(system_tokens, min(spec.boundary_tokens, current_start))
    region_first = max(system_count, min(spec.boundary_sequence, current_seq))
    if cache_state is not None:
        cut = max(region_start, min(cache_state.cut_tokens, current_start))
    else:
        cut = history_cut(region_start, current_start, room, spec.chunk_tokens)

    loaded: list[ConversationMessage] = []
    if session is not None and conversation is not None and stored_count:
        turns = spec.artifact_turns
        min_turn = conversation.turn_count - turns + 1 if turns > 0 else None
        loaded = await stored_tail(
            session,
            conversation,
            system_count=system_count,
            cut=cut,
            min_turn=min_turn,
            first_sequence=region_first,
        )

    window = HistoryWindow(
        region_start=region_start,
        region_end=current_start,
        region_count=current_seq - region_first,
        region_first=region_first,
        current_first=current_seq,
    )
    for message in attach_reasoning_steps(loaded + new):
        if message.sequence_number < system_count:
            window.system.append(message)
        elif message.sequence_number < current_seq:
            window.history.append(message)
        else:
            window.current.append(message)
    return window
