"""The inspector shows a message's reasoning: ``reasoning_content``, or Anthropic's thinking
blocks when that is all the provider sent (issue 13: stored and shown, not resent)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from app.inspect.views import message_view


def row(**fields: Any) -> Any:
    values = {
        "sequence_number": 3,
        "turn_number": 1,
        "role": "assistant",
        "content": "It is sunny.",
        "token_count": 9,
        "status": "complete",
        "request_id": "req_1",
        "tool_call_id": None,
        "tool_calls": None,
        "reasoning_content": None,
        "thinking_blocks": None,
    }
    return SimpleNamespace(**(values | fields))


def test_thinking_blocks_are_shown_when_there_is_no_reasoning_content() -> None:
    blocks = [
        {"type": "thinking", "thinking": "Check the forecast first.", "signature": "sig-abc"},
        {"type": "redacted_thinking", "data": "redacted:xyz"},
    ]
    view = message_view(row(thinking_blocks=blocks))
    assert view.reasoning == "Check the forecast first.\n\n[redacted thinking]"
    assert "sig-abc" not in (view.reasoning or "")


def test_reasoning_content_wins_and_none_stays_none() -> None:
    blocks = [{"type": "thinking", "thinking": "block text", "signature": "s"}]
    assert message_view(row(reasoning_content="plain", thinking_blocks=blocks)).reasoning == "plain"
    assert message_view(row()).reasoning is None
