"""Anthropic's context editing (``context_management.edits``) done by contextgate, for any model.

Anthropic clears old tool results and thinking server-side when a client asks (beta
``context-management-2025-06-27``). contextgate already does that work itself, so it never
forwards the edits (nor their beta): it maps them onto its own policy for this one request and
answers with Anthropic's ``context_management.applied_edits``, computed from what it did.

- ``clear_tool_uses_20250919`` becomes the request's ``context.cache`` (the cache-aware fit,
  app/context/cache_fit.py): ``trigger`` (input tokens) the high-water mark, ``keep`` the raw
  results kept, ``clear_at_least`` the minimum batch, ``exclude_tools`` added to the protected
  tools (the operator's stay protected whatever the request says). Omitted fields take
  Anthropic's documented defaults (trigger 100,000 input tokens, keep 3 tool uses, no minimum),
  since that is what the client asked for. Reported: the tool results sent as placeholders in
  this prompt and the tokens that saves (``cache_stats.cleared_tool_results`` /
  ``cleared_tokens``), which is what Anthropic reports for the prompt it edits.
- ``clear_thinking_20251015``: contextgate resends the thinking of the current turn (its tool
  loop, as Anthropic requires while thinking is on) and never older turns'; the edit is
  accepted with any ``keep`` and the turns whose thinking was not sent are reported.
- ``compact_20260112``: its ``trigger`` becomes the request's ``context.compaction_ratio``
  (contextgate's own compaction, raw history kept); Anthropic reports no applied edit for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Literal, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.context.budget import BudgetPolicy, input_budget
from app.protocol.chat import CacheOptions, ChatCompletionRequest, ContextOptions
from app.wire.chat import ChatMessage

if TYPE_CHECKING:
    from app.core.settings import Settings
    from app.llm.client import LLMClient
    from app.turns.prepared import Prepared

__all__ = [
    "AppliedEdits",
    "EDIT_BETAS",
    "ClearThinking",
    "ClearToolUses",
    "Compact",
    "ContextManagement",
    "applied_edits",
    "edited_context",
    "request_budget",
    "thinking_cleared",
    "upstream_beta",
]

# The betas that ask for these edits: contextgate does the work, so the upstream never sees them.
EDIT_BETAS = frozenset({"context-management-2025-06-27", "compact-2026-01-12"})

# Anthropic's documented defaults for what an edit leaves out.
DEFAULT_TRIGGER_TOKENS = 100_000
DEFAULT_KEEP_TOOL_USES = 3
DEFAULT_COMPACT_TRIGGER_TOKENS = 150_000
MIN_COMPACT_TRIGGER_TOKENS = 50_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputTokens(_Strict):
    type: Literal["input_tokens"]
    value: int = Field(ge=1)


class InputTokensAtLeast(_Strict):
    type: Literal["input_tokens"]
    value: int = Field(ge=0)


class ToolUses(_Strict):
    type: Literal["tool_uses"]
    value: int = Field(ge=0)


class ThinkingTurns(_Strict):
    type: Literal["thinking_turns"]
    value: int = Field(ge=0)


class AllThinkingTurns(_Strict):
    type: Literal["all"]


Trigger = Annotated[InputTokens | ToolUses, Field(discriminator="type")]
ThinkingKeep = Annotated[ThinkingTurns | AllThinkingTurns, Field(discriminator="type")]


class ClearToolUses(_Strict):
    type: Literal["clear_tool_uses_20250919"]
    trigger: Trigger | None = None
    keep: ToolUses | None = None
    clear_at_least: InputTokensAtLeast | None = None
    exclude_tools: list[str] | None = None
    # Accepted, not applied: the tool_use inputs stay (README, "Context editing").
    clear_tool_inputs: bool | list[str] | None = None


class ClearThinking(_Strict):
    type: Literal["clear_thinking_20251015"]
    keep: ThinkingKeep | Literal["all"] | None = None


class Compact(_Strict):
    type: Literal["compact_20260112"]
    trigger: InputTokens | None = None
    # Accepted, not applied: contextgate's summarizer has its own instructions and never pauses.
    instructions: str | None = None
    pause_after_compaction: bool | None = None

    @model_validator(mode="after")
    def _trigger_floor(self) -> Compact:
        if self.trigger is not None and self.trigger.value < MIN_COMPACT_TRIGGER_TOKENS:
            raise ValueError(
                f"compact_20260112 trigger must be at least {MIN_COMPACT_TRIGGER_TOKENS} tokens"
            )
        return self


Edit = Annotated[ClearToolUses | ClearThinking | Compact, Field(discriminator="type")]
E = TypeVar("E", ClearToolUses, ClearThinking, Compact)


class ContextManagement(_Strict):
    """The request's ``context_management``: each strategy at most once."""

    edits: list[Edit] = Field(default_factory=list)

    @model_validator(mode="after")
    def _once_each(self) -> ContextManagement:
        kinds = [edit.type for edit in self.edits]
        for kind in kinds:
            if kinds.count(kind) > 1:
                raise ValueError(f"context_management.edits: '{kind}' may appear only once")
        return self

    def find(self, kind: type[E]) -> E | None:
        return next((edit for edit in self.edits if isinstance(edit, kind)), None)


# ---- request: the edits as contextgate's policy ----------------------------------------


def request_budget(settings: Settings, llm: LLMClient, request: ChatCompletionRequest) -> int:
    """The input budget the pipeline will give this request (app/context/budget.py)."""
    return input_budget(
        explicit=request.context.max_input_tokens,
        context_window=llm.model_info(request.model).max_input_tokens,
        output_tokens_requested=request.output_tokens_requested,
        policy=BudgetPolicy(
            default_context_window=settings.default_context_window,
            output_reserve_tokens=settings.output_reserve_tokens,
            safety_margin_ratio=settings.safety_margin_ratio,
        ),
    )


def _ratio(tokens: int, budget: int) -> float:
    """``tokens`` as a share of ``budget`` such that ``int(share * budget) == tokens`` (at most
    1: a trigger above the budget fires at the budget, where the prompt must fit anyway)."""
    return min(1.0, (tokens + 0.5) / max(budget, 1))


def _cache_options(edit: ClearToolUses, cache: CacheOptions, budget: int) -> CacheOptions:
    update: dict[str, object] = {"enabled": True}
    trigger = edit.trigger or InputTokens(type="input_tokens", value=DEFAULT_TRIGGER_TOKENS)
    if isinstance(trigger, InputTokens):  # a tool-use count has no token mark: the policy's
        update["high_water_ratio"] = _ratio(trigger.value, budget)
    update["keep_tool_results"] = edit.keep.value if edit.keep else DEFAULT_KEEP_TOOL_USES
    update["clear_at_least_tokens"] = edit.clear_at_least.value if edit.clear_at_least else 0
    if edit.exclude_tools:
        update["exclude_tools"] = sorted({*(cache.exclude_tools or ()), *edit.exclude_tools})
    return cache.model_copy(update=update)


def edited_context(
    management: ContextManagement,
    context: ContextOptions,
    budget: int,
    *,
    new_user_turn: bool = False,
) -> ContextOptions:
    """The request's ``context`` options with its edits applied (``budget``: its input budget).

    The edits win over the request's own ``context.cache`` fields they speak of; tools listed in
    either are protected (and the operator's always are: app/context/cache_policy.py). Clearing
    older turns' thinking (``keep`` other than ``"all"``) rewrites what the prompt owner keeps:
    a new user turn then rebuilds the prompt (``context.rebase``), whose older turns go without
    their thinking, as Anthropic's own clearing does."""
    update: dict[str, object] = {}
    thinking = management.find(ClearThinking)
    if thinking is not None and thinking.keep != "all" and new_user_turn:
        update["rebase"] = True
    clear = management.find(ClearToolUses)
    if clear is not None:
        update["cache"] = _cache_options(clear, context.cache, budget)
    compact = management.find(Compact)
    if compact is not None:
        trigger = compact.trigger.value if compact.trigger else DEFAULT_COMPACT_TRIGGER_TOKENS
        update["compaction_ratio"] = _ratio(trigger, budget)
    return context.model_copy(update=update) if update else context


def upstream_beta(value: str) -> str | None:
    """The ``anthropic-beta`` header without the edit betas (None when nothing is left)."""
    kept = [beta.strip() for beta in value.split(",") if beta.strip() not in EDIT_BETAS]
    kept = [beta for beta in kept if beta]
    return ",".join(kept) if kept else None


# ---- answer: what was done, in Anthropic's words ---------------------------------------


class ClearToolUsesApplied(TypedDict):
    type: Literal["clear_tool_uses_20250919"]
    cleared_tool_uses: int
    cleared_input_tokens: int


class ClearThinkingApplied(TypedDict):
    type: Literal["clear_thinking_20251015"]
    cleared_thinking_turns: int
    cleared_input_tokens: int


class AppliedEdits(TypedDict):
    """Anthropic's ``context_management`` in an answer."""

    applied_edits: list[ClearToolUsesApplied | ClearThinkingApplied]


def _thinking_key(message: ChatMessage) -> tuple[str, ...] | str:
    """An answer by its tool call ids, else by its text (as the client and the store have it)."""
    calls = message.get("tool_calls") or []
    if calls:
        return tuple(str(call.get("id")) for call in calls)
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content or "")


def _thinking_text(message: ChatMessage) -> str:
    parts = [
        str(block.get("thinking") or block.get("data") or "")
        for block in message.get("thinking_blocks") or []
    ]
    return "".join(parts) or str(message.get("reasoning_content") or "")


def thinking_cleared(
    client: list[ChatMessage], sent: list[ChatMessage], count: Callable[[str], int]
) -> tuple[int, int]:
    """Turns whose thinking the client sent but contextgate did not send upstream, and its
    tokens. ``client``: the request's messages in chat form; ``sent``: the upstream's. A turn
    runs from a user message to the next (a tool loop is one turn); only answers sent without
    their thinking count (a message the fit dropped whole is not a thinking edit)."""
    thought = {
        _thinking_key(m): _thinking_text(m)
        for m in client
        if m.get("role") == "assistant" and _thinking_text(m)
    }
    turns: set[int] = set()
    tokens = 0
    turn = 0
    for message in sent:
        if message.get("role") == "user":
            turn += 1
        if message.get("role") != "assistant" or _thinking_text(message):
            continue
        text = thought.get(_thinking_key(message))
        if text:
            turns.add(turn)
            tokens += count(text)
    return len(turns), tokens


def applied_edits(
    management: ContextManagement, prepared: Prepared, count: Callable[[str], int]
) -> AppliedEdits:
    """Anthropic's ``context_management`` for the answer: the edits that changed this prompt,
    in the request's order, with contextgate's own figures."""
    stats = prepared.utilization.cache_stats
    applied: list[ClearToolUsesApplied | ClearThinkingApplied] = []
    for edit in management.edits:
        if isinstance(edit, ClearToolUses) and stats.cleared_tool_results:
            applied.append(
                {
                    "type": "clear_tool_uses_20250919",
                    "cleared_tool_uses": stats.cleared_tool_results,
                    "cleared_input_tokens": stats.cleared_tokens,
                }
            )
        elif isinstance(edit, ClearThinking):
            client = [m for m in prepared.request.chat_messages() if m["role"] == "assistant"]
            turns, tokens = thinking_cleared(client, prepared.messages, count)
            if turns:
                applied.append(
                    {
                        "type": "clear_thinking_20251015",
                        "cleared_thinking_turns": turns,
                        "cleared_input_tokens": tokens,
                    }
                )
    return {"applied_edits": applied}
