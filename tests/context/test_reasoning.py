"""Which assistant messages carry their reasoning back upstream (app/context/reasoning.py)."""

from __future__ import annotations

from typing import Any

from app.context.metadata import ContextUtilization
from app.context.reasoning import LOOP_CUT_NOTE, render_messages
from app.conversations.messages import ConversationMessage

BLOCKS = [{"type": "thinking", "thinking": "t", "signature": "s"}]
CALL = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]


def thinking_assistant(**extra: Any) -> ConversationMessage:
    return ConversationMessage(
        role="assistant", content=None, tool_calls=CALL, thinking_blocks=BLOCKS,
        reasoning_content="r", **extra,
    )  # fmt: skip


def test_only_the_current_loop_carries_reasoning() -> None:
    sent = [
        ConversationMessage(role="system", content="s"),
        ConversationMessage(role="user", content="old"),
        thinking_assistant(),
        ConversationMessage(role="tool", tool_call_id="c1", content="x"),
        ConversationMessage(role="user", content="new"),
        thinking_assistant(),
        ConversationMessage(role="tool", tool_call_id="c1", content="y"),
    ]
    utilization = ContextUtilization(model_name="m")
    rendered = render_messages(sent, utilization)
    assert "thinking_blocks" not in rendered[2]
    assert "reasoning_content" not in rendered[2]
    assert rendered[5]["thinking_blocks"] == BLOCKS
    assert rendered[5]["reasoning_content"] == "r"
    assert utilization.notes == []


def test_a_loop_whose_start_was_cut_drops_its_thinking_and_says_so() -> None:
    sent = [
        thinking_assistant(),
        ConversationMessage(role="tool", tool_call_id="c1", content="y"),
    ]
    utilization = ContextUtilization(model_name="m")
    rendered = render_messages(sent, utilization)
    assert all("thinking_blocks" not in m for m in rendered)
    assert utilization.notes == [LOOP_CUT_NOTE]


def test_no_reasoning_no_note() -> None:
    sent = [ConversationMessage(role="assistant", content="hi")]
    utilization = ContextUtilization(model_name="m")
    assert render_messages(sent, utilization) == [{"role": "assistant", "content": "hi"}]
    assert utilization.notes == []
