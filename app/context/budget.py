"""How many input tokens a request may send upstream."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BudgetPolicy", "input_budget"]


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
