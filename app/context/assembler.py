"""Assemble what is sent upstream: system prompt, fitted history, current turn."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.context.budget import TokenBudget
from app.context.cache_fit import CacheFit, CacheInput, cache_fit
from app.context.fit import fit_history
from app.context.metadata import ContextBreakdown, ContextUtilization
from app.context.reasoning import render_messages
from app.context.seal import LOOP_CUT_NOTE, Anchor, SealResult, seal_prompt
from app.conversations.messages import ConversationMessage
from app.core.errors import ContextLengthExceeded
from app.tokens.counter import REPLY_PRIMER
from app.wire.chat import ChatMessage

__all__ = ["AssembledContext", "AssemblyInput", "assemble", "seal_assembled"]


@dataclass(slots=True)
class AssemblyInput:
    model: str
    budget: TokenBudget
    system: list[ConversationMessage]
    history: list[ConversationMessage]
    current: list[ConversationMessage]
    region_start: int
    region_end: int
    region_count: int
    chunk_tokens: int
    cache: CacheInput | None = None


@dataclass(slots=True)
class AssembledContext:
    messages: list[ChatMessage]
    utilization: ContextUtilization
    cache: CacheFit | None = None
    prefix_count: int = 0  # leading messages that stay the same until the next cut
    anchors: list[Anchor] = field(default_factory=list)  # answers with a prompt hash


def _fit_with_cache(spec: AssemblyInput, cache: CacheInput) -> CacheFit:
    return cache_fit(
        spec.history,
        cache,
        budget=spec.budget.usable,
        fixed=spec.budget.fixed,
        newer_tool_results=sum(1 for m in spec.current if m.role == "tool"),
    )


def assemble(spec: AssemblyInput) -> AssembledContext:
    budget = spec.budget
    system_tokens, current_tokens, fixed = budget.system, budget.current, budget.fixed
    if fixed > budget.usable:
        parts = "The system prompt, the tools and the newest message"
        if not budget.tools:
            parts = "The system prompt and the newest message"
        raise ContextLengthExceeded(
            f"{parts} need {fixed} tokens, more than the input budget of {budget.usable} "
            f"tokens for model '{spec.model}'. Shorten the message or raise "
            "context.max_input_tokens.",
            param="messages",
        )
    cached: CacheFit | None = None
    if spec.cache is not None:
        cached = _fit_with_cache(spec, spec.cache)
        kept, history_tokens = cached.kept, cached.tokens
        excluded = spec.region_count - len(kept)
    else:
        fit = fit_history(
            spec.history,
            region_start=spec.region_start,
            region_end=spec.region_end,
            region_count=spec.region_count,
            available=budget.history_room,
            chunk_tokens=spec.chunk_tokens,
        )
        kept, history_tokens, excluded = fit.kept, fit.tokens, fit.excluded_count
    sent = spec.system + kept + spec.current
    utilization = ContextUtilization(
        model_name=spec.model,
        strategy="simple",
        max_input_tokens=budget.usable,
        tokens_used=fixed + history_tokens,
        messages_included=len(sent),
        messages_excluded=excluded,
        breakdown=ContextBreakdown(
            system=system_tokens,
            tools=budget.tools,
            history=history_tokens,
            current=current_tokens,
            overhead=REPLY_PRIMER,
        ),
    )
    anchors: list[Anchor] = []
    # Old turns keep their frozen blocks from the cache fit's floor on; without it, none do.
    kept_blocks: set[int] = set()
    if cached is not None and spec.cache is not None:
        floor = cached.state.prefix_floor
        kept_blocks = {sequence for sequence in spec.cache.blocks if sequence >= floor}
    return AssembledContext(
        render_messages(sent, utilization, anchors, kept_blocks=kept_blocks),
        utilization,
        cache=cached,
        prefix_count=len(spec.system) + len(kept),
        anchors=anchors,
    )


def seal_assembled(assembled: AssembledContext, *, newest_sequence: int) -> SealResult:
    """Seal an assembled prompt; ``newest_sequence``: the conversation's newest stored message
    (the previous answer, when this prompt resends it)."""
    previous = next(
        (a.message for a in assembled.anchors if a.message.sequence_number == newest_sequence),
        None,
    )
    utilization = assembled.utilization
    return seal_prompt(
        assembled.messages,
        assembled.anchors,
        utilization,
        previous=previous,
        loop_cut=LOOP_CUT_NOTE in utilization.notes,
    )
