"""Issue 27: the budget is a value; each stage that measures a slice returns a new budget."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from app.context.budget import TokenBudget
from app.tokens.counter import REPLY_PRIMER

BASE = TokenBudget(10_000, system=100, current=200, memory=300, tools=400)


def test_the_budget_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        BASE.current = 1  # type: ignore[misc]
    assert not hasattr(BASE, "__dict__")  # slots


@pytest.mark.parametrize(
    ("method", "slice_"),
    [
        (TokenBudget.with_system, "system"),
        (TokenBudget.with_current, "current"),
        (TokenBudget.with_memory, "memory"),
        (TokenBudget.with_tools, "tools"),
    ],
)
def test_each_method_changes_only_its_slice(
    method: Callable[[TokenBudget, int], TokenBudget], slice_: str
) -> None:
    before = dataclasses.asdict(BASE)
    changed = method(BASE, 7)
    assert changed is not BASE
    assert dataclasses.asdict(changed) == before | {slice_: 7}
    assert dataclasses.asdict(BASE) == before  # the original is untouched


def test_the_derived_figures_follow_the_new_slices() -> None:
    budget = BASE.with_current(50).with_memory(1000)
    assert budget.fixed == REPLY_PRIMER + 100 + 400 + 50
    assert budget.usable == 10_000 - 1000
    assert budget.history_room == budget.usable - budget.fixed
    assert BASE.fixed == REPLY_PRIMER + 100 + 400 + 200
