"""Stored rows become ConversationMessages without validation (the history hot path); the
result must be indistinguishable from a validated model."""

from __future__ import annotations

from types import SimpleNamespace

from app.conversations.messages import (
    HISTORY_COLUMNS,
    ConversationMessage,
    ReasoningStep,
    from_history_row,
    to_conversation_message,
)

ROW = {
    "role": "assistant",
    "content": [{"type": "text", "text": "hi"}],
    "name": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    "tool_call_id": None,
    "reasoning_content": "thought",
    "thinking_blocks": [{"type": "thinking", "thinking": "thought", "signature": "sig"}],
    "context_prefix": None,
    "sequence_number": 7,
    "turn_number": 3,
    "token_count": 11,
    "start_tokens": 120,
    "status": "incomplete",
    "content_hash": "abc",
    "prompt_hash": "0123456789abcdef0123456789abcdef",
}


def test_a_row_becomes_the_same_message_validation_would_build() -> None:
    built = to_conversation_message(SimpleNamespace(**ROW))  # type: ignore[arg-type]
    validated = ConversationMessage(**ROW, stored=True)
    assert built == validated
    assert built.model_dump() == validated.model_dump()
    assert built.model_fields_set == set(ConversationMessage.model_fields)
    assert built.end_tokens == 131
    assert built.to_openai()["tool_calls"] == ROW["tool_calls"]
    assert "thinking_blocks" not in built.to_openai()
    assert built.to_openai(with_reasoning=True)["thinking_blocks"] == ROW["thinking_blocks"]


def test_messages_built_from_rows_are_independent() -> None:
    first = to_conversation_message(SimpleNamespace(**ROW))  # type: ignore[arg-type]
    second = to_conversation_message(SimpleNamespace(**ROW))  # type: ignore[arg-type]
    first.reasoning_steps.append(ReasoningStep(tool_call_id="c1"))
    first.content = "changed"
    assert second.reasoning_steps == []
    assert second.content == ROW["content"]
    copy = first.model_copy(update={"turn_number": 9})
    assert (copy.turn_number, first.turn_number) == (9, 3)


def test_a_history_row_unpacks_by_position_into_the_same_message() -> None:
    row = tuple(ROW[name] for name in HISTORY_COLUMNS)
    assert set(HISTORY_COLUMNS) == set(ROW)
    assert from_history_row(row) == ConversationMessage(**ROW, stored=True)
    assert from_history_row(row) == to_conversation_message(SimpleNamespace(**ROW))  # type: ignore[arg-type]
