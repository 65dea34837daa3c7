"""The prompt owner's rule on its own (app/turns/owner.py): keep and append, or rebase and why."""

from __future__ import annotations

from typing import Any

import pytest

from app.context.cache_policy import CachePolicy
from app.turns.owner import KEPT, Continuation, Ledger, Watermarks, appended, decide

MARKS = Watermarks.of(10_000, CachePolicy(high_water_ratio=0.75, low_water_ratio=0.3))


def ledger(tokens: int = 4000, **fields: Any) -> Ledger:
    values: dict[str, Any] = {
        "epoch": 3,
        "answer_sequence": 9,
        "answer_tokens": 50,
        "own_system_hash": "",
        "attachments_key": "",
        "tokens": tokens,
        "system_tokens": 100,
        "memory_tokens": 0,
        "chain_hash": "ab" * 16,
        "cleared_tool_results": 0,
        "cleared_tokens": 0,
        "messages_excluded": 0,
        "messages": ({"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}),
        "artifacts": (),
    }
    values.update(fields)
    return Ledger(**values)


def call(**fields: Any) -> Continuation:
    values: dict[str, Any] = {
        "newest_sequence": 9,
        "continues_at_end": True,
        "own_system_hash": "",
        "attachments_key": "",
        "tail_tokens": 600,
        "fixed_tokens": 300,
    }
    values.update(fields)
    return Continuation(**values)


def test_marks_follow_the_policy() -> None:
    assert (MARKS.budget, MARKS.high, MARKS.low) == (10_000, 7_500, 3_000)
    inverted = Watermarks.of(1000, CachePolicy(high_water_ratio=0.5, low_water_ratio=0.9))
    assert inverted.low == inverted.high == 500  # low never above high


def test_a_call_that_fits_keeps_the_ledger_in_its_epoch() -> None:
    decision = decide(ledger(), call(), MARKS)
    assert decision.keep
    assert decision.reason == KEPT
    assert decision.epoch == 3
    assert decision.ledger is not None


def test_the_first_prompt_is_a_rebase_of_epoch_zero() -> None:
    decision = decide(None, call(newest_sequence=-1), MARKS)
    assert decision.rebase
    assert decision.epoch == 0
    assert decision.ledger is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"newest_sequence": 11}, "continued from another point"),
        ({"continues_at_end": False}, "continued from another point"),
        ({"own_system_hash": "other"}, "system prompt changed"),
        ({"attachments_key": "other"}, "attachments changed"),
        ({"tail_tokens": 3201}, "high-water mark"),
        ({"asked_to_rebase": True}, "asked for its context to be rebuilt"),
    ],
)
def test_only_these_rebase_and_each_says_why(change: dict[str, Any], reason: str) -> None:
    decision = decide(ledger(), call(**change), MARKS)
    assert decision.rebase
    assert reason in decision.reason
    assert decision.epoch == 4
    assert decision.ledger is None


def test_the_high_water_mark_is_inclusive() -> None:
    # 4000 kept + 3200 new + 300 sent beside them = 7500: exactly the mark, still kept
    assert decide(ledger(), call(tail_tokens=3200), MARKS).keep


def test_appending_never_changes_what_was_kept() -> None:
    kept = ledger()
    tail = [{"role": "tool", "tool_call_id": "c1", "content": "result"}]
    prompt = appended(kept, tail)
    assert prompt[: len(kept.messages)] == list(kept.messages)
    assert prompt[len(kept.messages) :] == tail
    prompt[0]["content"] = "changed later by someone"  # a copy of the list, not of the ledger
    assert len(kept.messages) == 2


def test_a_loop_grows_to_the_mark_then_rebases_rarely() -> None:
    """Over a loop that grows by G a call, rebases come about every B x (high - low) / G calls
    (PROMPT.md invariant 3): here 10,000 x 0.45 / 550 = about 8."""
    tokens, rebases, epoch = 3000, 0, 0
    for sequence in range(0, 80, 2):
        current = ledger(tokens=tokens, answer_sequence=sequence, epoch=epoch)
        decision = decide(current, call(newest_sequence=sequence, tail_tokens=550), MARKS)
        if decision.keep:
            tokens += 550
        else:
            rebases += 1
            epoch = decision.epoch
            tokens = MARKS.low
    assert 4 <= rebases <= 6  # 40 calls
