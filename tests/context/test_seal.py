"""The prompt seal: a chained hash of each prompt, prefix_kept as a fact, and thinking resent
even after a rebase edited what precedes it (signatures cover the thinking text only).

Each "call" below renders the stored messages as the assembler does, seals the prompt, and
stores the hash with the answer, as the pipeline does; the next call checks against it.
"""

from __future__ import annotations

from typing import Any

from app.context.metadata import ContextUtilization
from app.context.reasoning import render_messages
from app.context.seal import (
    EDITED_BEFORE_THINKING_NOTE,
    Anchor,
    SealResult,
    chain_hash,
    seal_prompt,
)
from app.conversations.messages import ConversationMessage

THINKING = [{"type": "thinking", "thinking": "I should look", "signature": "sig-1"}]


def message(sequence: int, role: str, content: str, **fields: Any) -> ConversationMessage:
    return ConversationMessage(role=role, content=content, sequence_number=sequence, **fields)


def call(
    stored: list[ConversationMessage], *, edit: dict[int, str] | None = None
) -> tuple[list[dict[str, Any]], SealResult, ContextUtilization]:
    """Render ``stored`` (with ``edit``: index -> content sent instead), seal it."""
    utilization = ContextUtilization(model_name="m", strategy="simple")
    anchors: list[Anchor] = []
    rendered = render_messages(stored, utilization, anchors)
    for index, content in (edit or {}).items():
        rendered[index]["content"] = content
    # the conversation's newest stored message: the answer before the client's new messages
    answers = [m for m in stored if m.role == "assistant" and m.prompt_hash]
    previous = answers[-1] if answers else None
    return rendered, seal_prompt(rendered, anchors, utilization, previous=previous), utilization


def answered(
    stored: list[ConversationMessage], seal: SealResult, content: str = "", **fields: Any
) -> list[ConversationMessage]:
    """``stored`` plus the answer the provider gave to the sealed prompt."""
    answer = message(len(stored), "assistant", content, prompt_hash=seal.prompt_hash, **fields)
    return [*stored, answer]


def tool_call(call_id: str) -> list[dict[str, Any]]:
    return [{"id": call_id, "type": "function", "function": {"name": "grep", "arguments": "{}"}}]


def loop_so_far() -> list[ConversationMessage]:
    """system, user, answer 1 (thinking + call), its result: ready for the loop's 2nd call."""
    stored = [message(0, "system", "You are terse."), message(1, "user", "Find it.")]
    _, first, _ = call(stored)
    stored = answered(stored, first, thinking_blocks=THINKING, tool_calls=tool_call("c1"))
    return [*stored, message(3, "tool", "a long grep output", tool_call_id="c1")]


def test_an_unchanged_prefix_resends_the_thinking_and_keeps_the_previous_prompt() -> None:
    stored = loop_so_far()
    rendered, seal, utilization = call(stored)
    assert rendered[2]["thinking_blocks"] == THINKING
    assert seal.reasoning_withheld is False
    assert utilization.notes == []
    # the third call: the answer to the second call is the previous one, its prefix unchanged
    stored = answered(stored, seal, thinking_blocks=THINKING, tool_calls=tool_call("c2"))
    stored.append(message(5, "tool", "more output", tool_call_id="c2"))
    rendered, seal, _ = call(stored)
    assert seal.previous_kept is True
    assert [m.get("thinking_blocks") for m in rendered[2::2]] == [THINKING, THINKING]


def test_an_edit_before_a_resent_thinking_block_keeps_the_reasoning_and_says_so() -> None:
    stored = loop_so_far()
    _, seal, _ = call(stored)
    stored = answered(stored, seal, thinking_blocks=THINKING, tool_calls=tool_call("c2"))
    stored.append(message(5, "tool", "more output", tool_call_id="c2"))
    # a rebase cleared the first tool result, before answer 2's thinking
    rendered, seal, utilization = call(stored, edit={3: "[cleared]"})
    assert seal.reasoning_withheld is False
    assert [m.get("thinking_blocks") for m in rendered[2::2]] == [THINKING, THINKING]
    assert utilization.notes == [EDITED_BEFORE_THINKING_NOTE.format(index=4)]
    assert seal.previous_kept is False


def test_an_edit_before_the_loop_keeps_it_and_the_hash_is_of_what_is_sent() -> None:
    stored = loop_so_far()
    _, unchanged, _ = call(stored)
    rendered, edited, _ = call(stored, edit={0: "You are verbose."})
    assert edited.reasoning_withheld is False
    assert rendered[2]["thinking_blocks"] == THINKING
    assert edited.prompt_hash != unchanged.prompt_hash
    again, same, _ = call(stored, edit={0: "You are verbose."})
    assert same.prompt_hash == edited.prompt_hash
    assert again == rendered


def test_a_new_user_turn_does_not_resend_old_thinking_and_reports_the_prefix_it_broke() -> None:
    stored = loop_so_far()
    _, seal, _ = call(stored)
    stored = answered(stored, seal, content="Found it.")
    stored.append(message(5, "user", "Thanks. And the other one?"))
    rendered, seal, utilization = call(stored)
    assert all("thinking_blocks" not in m for m in rendered)
    assert seal.reasoning_withheld is False  # an older turn's thinking is not withheld: not due
    assert utilization.notes == []


def test_answers_without_a_hash_keep_the_previous_behaviour() -> None:
    stored = [
        message(0, "user", "Find it."),
        message(1, "assistant", "", thinking_blocks=THINKING, tool_calls=tool_call("c1")),
        message(2, "tool", "output", tool_call_id="c1"),
    ]
    rendered, seal, utilization = call(stored, edit={0: "Find it, please."})
    assert rendered[1]["thinking_blocks"] == THINKING
    assert seal.previous_kept is None
    assert seal.reasoning_withheld is False
    assert utilization.notes == []


def test_the_hash_chains_so_a_kept_prompt_extends_its_hash_without_rehashing() -> None:
    stored = loop_so_far()
    rendered, seal, _ = call(stored)
    assert seal.prompt_hash == chain_hash("", rendered)
    head = chain_hash("", rendered[:2])
    assert chain_hash(head, rendered[2:]) == seal.prompt_hash
    assert chain_hash("", rendered[:3]) != seal.prompt_hash


def test_a_cut_loop_start_withholds_the_reasoning_as_the_last_resort() -> None:
    stored = loop_so_far()[2:]  # the loop's user message did not fit: an answer comes first
    utilization = ContextUtilization(model_name="m", strategy="simple")
    anchors: list[Anchor] = []
    rendered = render_messages(stored, utilization, anchors)
    seal = seal_prompt(rendered, anchors, utilization, previous=None, loop_cut=True)
    assert seal.reasoning_withheld is True
    assert "thinking_blocks" not in rendered[0]
