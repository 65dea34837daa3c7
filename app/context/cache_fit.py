"""The cache-aware history fit: keep the previous prompt as the prefix while it fits.

Providers bill a cached prompt prefix at about a tenth of the input price, so trimming a little
history on every call (which rewrites the prefix) costs more than it saves. This fit remembers
its decisions with the conversation (``CacheState``): the history is sent from a stored cut on,
with the tool results before a stored boundary replaced by short placeholders. While that
history plus the rest of the prompt fits the budget (or the lower ``high_water_ratio`` x budget
a policy may set, like the ``trigger`` of Anthropic's context editing), it is sent unchanged,
byte for byte. When it does not, the fit rebases once and deep: old tool results are cleared in
one batch (the newest ``keep_tool_results`` stay raw, excluded tools never, never less than
``clear_at_least_tokens`` at once), then, if still above the low-water mark (``low_water_ratio``
x budget), the oldest messages are dropped down to it, cutting at a user message when one allows
it. Tool call/result pairs are never split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from app.context.cache_policy import CachePolicy
from app.context.fit import drop_incoherent
from app.context.metadata import ClearedToolResult as ClearedToolResultOut
from app.context.metadata import ContextUtilization
from app.conversations.cache_state import CacheState
from app.conversations.messages import ConversationMessage
from app.wire.chat import ChatMessage

__all__ = [
    "CacheFit",
    "CacheInput",
    "ClearedResult",
    "annotate",
    "cache_fit",
    "placeholder_text",
]

CountMessage = Callable[[ChatMessage], int]


@dataclass(slots=True)
class CacheInput:
    """The cache-aware fit's inputs (see app/context/cache_fit.py)."""

    policy: CachePolicy
    state: CacheState
    region_first: int
    current_first: int
    count: CountMessage
    # Tokens of the per-turn blocks frozen with history user messages (sequence -> tokens).
    blocks: dict[int, int] = field(default_factory=dict)
    compacted_sequence: int = 0  # the compaction boundary (0: none)
    force: bool = False  # the prompt owner rebases: clear and cut to the low-water mark


@dataclass(frozen=True, slots=True)
class ClearedResult:
    sequence_number: int
    tool_call_id: str
    tool_name: str
    tokens: int  # the raw result's tokens

    def report(self) -> ClearedToolResultOut:
        """As ``cache_stats.cleared_now`` lists it."""
        return ClearedToolResultOut(
            sequence_number=self.sequence_number,
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            tokens=self.tokens,
        )


@dataclass(slots=True)
class CacheFit:
    kept: list[ConversationMessage] = field(default_factory=list)
    tokens: int = 0
    state: CacheState = field(default_factory=CacheState)
    rebased: bool = False  # this request cut and/or cleared: a new cached prefix starts
    dropped: int = 0  # messages dropped by this request's cut
    cleared_now: list[ClearedResult] = field(default_factory=list)
    cleared_in_prompt: int = 0  # placeholders in the prompt
    cleared_tokens: int = 0  # tokens the placeholders save


def placeholder_text(tool_name: str, call_id: str, tokens: int) -> str:
    return (
        f"[contextgate: the result of tool '{tool_name}' (call {call_id}, {tokens} tokens) "
        "was cleared from this prompt to save context; the full result is stored with the "
        "conversation and is recalled when a later question needs it]"
    )


class _Clearing:
    """Renders tool results before a boundary as placeholders (the same bytes on every call)."""

    def __init__(
        self, history: list[ConversationMessage], policy: CachePolicy, count: CountMessage
    ) -> None:
        self.policy = policy
        self.count = count
        self.names: dict[str, str] = {}
        for message in history:
            for call in message.tool_calls or []:
                function = call.get("function") or {}
                self.names[str(call.get("id"))] = str(function.get("name") or "tool")
        self._cache: dict[int, ConversationMessage | None] = {}

    def name(self, message: ConversationMessage) -> str:
        return self.names.get(str(message.tool_call_id), message.name or "tool")

    def clearable(self, message: ConversationMessage) -> bool:
        return message.role == "tool" and self.name(message) not in self.policy.exclude_tools

    def placeholder(self, message: ConversationMessage) -> ConversationMessage | None:
        """The cleared form, or None when clearing would not save anything worth it."""
        if message.sequence_number in self._cache:
            return self._cache[message.sequence_number]
        text = placeholder_text(self.name(message), str(message.tool_call_id), message.token_count)
        sent: ChatMessage = {"role": "tool", "content": text, "tool_call_id": message.tool_call_id}
        tokens = self.count(sent)
        cleared = None
        if message.token_count > 2 * tokens:
            cleared = message.model_copy(update={"content": text, "token_count": tokens})
        self._cache[message.sequence_number] = cleared
        return cleared

    def render(
        self, messages: list[ConversationMessage], boundary: int
    ) -> list[ConversationMessage]:
        out = []
        for message in messages:
            if message.sequence_number < boundary and self.clearable(message):
                message = self.placeholder(message) or message
            out.append(message)
        return out


def _tokens(messages: list[ConversationMessage]) -> int:
    return sum(m.token_count for m in messages)


def _cut_index(view: list[ConversationMessage], target: int) -> int:
    """The first message to keep so the rest fits ``target``: at a user message if possible."""
    suffix = [0] * (len(view) + 1)
    for index in range(len(view) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + view[index].token_count
    fallback = len(view)
    for index, message in enumerate(view):
        if suffix[index] > target:
            continue
        if message.role == "user":
            return index
        if message.role != "tool" and fallback == len(view):
            fallback = index
    return fallback


def _with_blocks(
    messages: list[ConversationMessage], blocks: Mapping[int, int], floor: int
) -> list[ConversationMessage]:
    """``messages`` counted as sent: a user message at or after ``floor`` with its frozen
    per-turn block (``blocks``: sequence number -> the block's tokens)."""
    if not blocks:
        return messages
    return [
        m.model_copy(update={"token_count": m.token_count + blocks[m.sequence_number]})
        if m.sequence_number >= floor and m.sequence_number in blocks
        else m
        for m in messages
    ]


def cache_fit(
    history: list[ConversationMessage],
    cache: CacheInput,
    *,
    budget: int,
    fixed: int,
    newer_tool_results: int,
) -> CacheFit:
    """Fit ``history`` (oldest first, loaded from the stored cut on) into ``budget - fixed``.

    ``cache.region_first``: the first message history may start at (after the system prompt
    and any compaction boundary); ``cache.current_first``: the first message of the current
    turn; ``newer_tool_results``: tool results in the current turn (they count as the newest
    kept); ``cache.blocks``: the tokens of the per-turn blocks frozen with user messages (sent
    from the stored ``prefix_floor`` on; a rebase moves the floor to the current turn,
    dropping them, and so does a compaction boundary (``cache.compacted_sequence``) past the
    floor).
    """
    state, policy, blocks = cache.state, cache.policy, cache.blocks
    region_first, end_sequence = cache.region_first, cache.current_first
    compacted_sequence, force = cache.compacted_sequence, cache.force
    count = cache.count
    start = max(state.cut_sequence, region_first)
    messages = [m for m in history if start <= m.sequence_number < end_sequence]
    clearing = _Clearing(messages, policy, count)
    available = budget - fixed
    high_water = min(available, int(policy.high_water_ratio * budget) - fixed)
    sent = _with_blocks(messages, blocks, state.prefix_floor)
    view = drop_incoherent(clearing.render(sent, state.cleared_sequence))
    cut_sequence, cut_tokens = start, messages[0].start_tokens if messages else state.cut_tokens
    result = CacheFit(state=state)
    if compacted_sequence > state.prefix_floor and blocks:
        # Compaction moved the history's start past the floor: the prompt is rewritten from
        # there anyway, so the old turns' blocks leave it now too.
        state = replace(state, prefix_floor=end_sequence)
        result.state = state
        sent = _with_blocks(messages, blocks, state.prefix_floor)
        view = drop_incoherent(clearing.render(sent, state.cleared_sequence))
    if force or _tokens(view) > high_water:
        result.rebased = True
        boundary = _clear_batch(messages, clearing, state.cleared_sequence, newer_tool_results)
        view = drop_incoherent(clearing.render(messages, boundary))
        low_water = min(policy.low_water_ratio, policy.high_water_ratio)
        target = max(0, min(available, int(low_water * budget) - fixed))
        if _tokens(view) > target:
            index = _cut_index(view, target)
            result.dropped = index
            if index < len(view):
                cut_sequence, cut_tokens = view[index].sequence_number, view[index].start_tokens
            else:
                cut_sequence = end_sequence
                cut_tokens = messages[-1].end_tokens if messages else cut_tokens
            view = drop_incoherent(view[index:])
        result.cleared_now = [
            ClearedResult(m.sequence_number, str(m.tool_call_id), clearing.name(m), m.token_count)
            for m in messages
            if state.cleared_sequence <= m.sequence_number < boundary
            and m.sequence_number >= cut_sequence
            and clearing.clearable(m)
            and clearing.placeholder(m) is not None
        ]
        result.state = CacheState(cut_sequence, cut_tokens, boundary, end_sequence)
    raw = {m.sequence_number: m.token_count for m in messages}
    placeholders = [m for m in view if m.role == "tool" and raw[m.sequence_number] != m.token_count]
    result.kept = view
    result.tokens = _tokens(view)
    result.cleared_in_prompt = len(placeholders)
    result.cleared_tokens = sum(raw[m.sequence_number] - m.token_count for m in placeholders)
    return result


def _clear_batch(
    messages: list[ConversationMessage],
    clearing: _Clearing,
    boundary: int,
    newer_tool_results: int,
) -> int:
    """The new clearing boundary: all but the newest results, if that clears enough at once."""
    policy = clearing.policy
    candidates = [m for m in messages if m.sequence_number >= boundary and clearing.clearable(m)]
    keep = max(0, policy.keep_tool_results - newer_tool_results)
    if keep:
        candidates = candidates[:-keep]
    saving = 0
    for message in candidates:
        cleared = clearing.placeholder(message)
        if cleared is not None:
            saving += message.token_count - cleared.token_count
    if not candidates or saving <= 0 or saving < policy.clear_at_least_tokens:
        return boundary
    return candidates[-1].sequence_number + 1


def annotate(
    fit: CacheFit,
    utilization: ContextUtilization,
    *,
    continuing: bool,
    previous_kept: bool | None = None,
) -> None:
    """Write what the fit did into ``context_utilization.cache_stats``. ``previous_kept``: the
    prompt seal's finding (app/context/seal.py), when the previous answer has a prompt hash;
    without one, the prefix is taken as kept when the fit did not rebase."""
    stats = utilization.cache_stats
    stats.prefix_kept = continuing and not fit.rebased if previous_kept is None else previous_kept
    stats.prefix_tokens = utilization.breakdown.system + fit.tokens
    stats.cut = fit.rebased and fit.dropped > 0
    stats.cut_at_sequence = fit.kept[0].sequence_number if fit.kept else None
    stats.messages_dropped = fit.dropped
    stats.cleared_tool_results = fit.cleared_in_prompt
    stats.cleared_tokens = fit.cleared_tokens
    stats.cleared_now = [c.report() for c in fit.cleared_now]
