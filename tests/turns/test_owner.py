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


def test_the_high_mark_sits_on_the_room_the_client_leaves() -> None:
    """An agent whose system prompt and tools take 3,000 of 10,000 tokens gets 0.75 of the
    7,000 it leaves before a rebase, not 0.75 of the whole; the low mark stays a share of the
    whole budget, so a rebase still clears down as far as before."""
    policy = CachePolicy(high_water_ratio=0.75, low_water_ratio=0.3)
    agent = Watermarks.of(10_000, policy, fixed=3_000)
    assert (agent.high, agent.low) == (3_000 + 5_250, 3_000)
    assert Watermarks.of(10_000, policy, fixed=0) == MARKS
    everything = Watermarks.of(10_000, policy, fixed=20_000)  # the fixed part alone overflows
    assert everything.high == 10_000
    assert everything.low <= everything.high


def test_a_ratio_the_request_gave_is_a_share_of_the_whole_budget() -> None:
    """Anthropic's ``trigger`` (30,000 input tokens) fires at 30,000, whatever is fixed."""
    policy = CachePolicy(high_water_ratio=0.3, low_water_ratio=0.1, high_water_of_room=False)
    assert Watermarks.of(100_000, policy, fixed=20_000).high == 30_000


def test_a_large_fixed_part_still_leaves_three_quarters_of_the_room_to_append() -> None:
    """After a rebase an agent's prompt is at least its fixed part; what it can append before
    the next rebase is 0.75 of the room left, where a mark on the whole budget left less
    (7,500 - 6,000 = 1,500 of 4,000 here: a rebase every few calls)."""
    policy = CachePolicy(high_water_ratio=0.75, low_water_ratio=0.3)
    for fixed in (4_000, 6_000, 8_000):
        marks = Watermarks.of(10_000, policy, fixed=fixed)
        assert marks.high - fixed == int(0.75 * (10_000 - fixed))
        assert marks.high - fixed > MARKS.high - fixed


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
