"""How many input tokens a request may send upstream, and what is spoken for in it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import orjson

from app.tokens.counter import REPLY_PRIMER, TokenCounter

__all__ = ["BudgetPolicy", "TokenBudget", "count_tools", "input_budget"]


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    default_context_window: int = 8192
    output_reserve_tokens: int = 1024
    safety_margin_ratio: float = 0.05


def input_budget(
    *,
    explicit: int | None,
    context_window: int | None,
    output_tokens_requested: int | None,
    policy: BudgetPolicy,
) -> int:
    """``context.max_input_tokens`` when given; else the window − output reserve − margin.

    The window comes from litellm's model map; an unknown model gets the documented default
    (``CONTEXTGATE_DEFAULT_CONTEXT_WINDOW``, 8192).
    """
    if explicit is not None:
        return explicit
    window = context_window or policy.default_context_window
    reserve = output_tokens_requested or policy.output_reserve_tokens
    reserve = min(reserve, window // 2)
    margin = int(window * policy.safety_margin_ratio)
    return max(1, window - reserve - margin)


async def count_tools(
    counter: TokenCounter, tools: Sequence[Mapping[str, object]] | None, model: str
) -> int:
    """Tokens of the tool definitions sent with the request: their JSON; a large set counted in
    the token pool (off the loop), and remembered: agents resend the same tools every call."""
    if not tools:
        return 0
    text = orjson.dumps(list(tools)).decode()
    await counter.precount([text], model)
    return counter.count_cached(text, model)


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """A request's input budget and what is spoken for, counted once and passed along.

    ``total`` is what ``input_budget`` allows. ``system``, ``tools`` (the tool definitions sent
    with the request) and ``current`` (the current turn, from the newest user message on) are
    counted once when the turn is measured; memory reserves the bundle and injected memories.
    The budget is a value: a stage that measures a slice returns a new budget (``with_…``) in
    its result (the context engine's has ``current`` of the turn it rewrote), and every later
    stage reads what it may use from the budget it is handed instead of recounting:
    ``history_room`` for the history (and artifacts) and ``fixed`` for what is always sent.
    """

    total: int
    system: int = 0
    current: int = 0
    memory: int = 0
    tools: int = 0

    def with_system(self, tokens: int) -> TokenBudget:
        """This budget with the system prompt taking ``tokens``."""
        return replace(self, system=tokens)

    def with_current(self, tokens: int) -> TokenBudget:
        """This budget with the current turn (as it will be sent) taking ``tokens``."""
        return replace(self, current=tokens)

    def with_memory(self, tokens: int) -> TokenBudget:
        """This budget with memory (bundle, injected memories, frozen blocks) taking ``tokens``."""
        return replace(self, memory=tokens)

    def with_tools(self, tokens: int) -> TokenBudget:
        """This budget with the tool definitions taking ``tokens``."""
        return replace(self, tools=tokens)

    @property
    def fixed(self) -> int:
        """Always sent: the reply primer, the system prompt, the tools and the current turn."""
        return REPLY_PRIMER + self.system + self.tools + self.current

    @property
    def usable(self) -> int:
        """The budget once memory (bundle, injected memories) has taken its part."""
        return self.total - self.memory

    @property
    def history_room(self) -> int:
        """What the history may take once everything always sent is counted."""
        return self.usable - self.fixed
