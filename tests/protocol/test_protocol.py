"""app/protocol: the chat request's shape rules and what it forwards, the size bounds of values
with no limit of their own, ``context.goal``, and the ``X-Contextgate-*`` response headers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from app.context.headers import HEADER_PREFIX, context_headers
from app.context.metadata import CacheStats, ContextUtilization, CostInfo
from app.protocol.bounds import MAX_EXTRA_BYTES, MAX_USER_CHARS, Metadata, check_extra_size
from app.protocol.chat import ChatCompletionRequest
from app.protocol.goal import ContextGoal

USER = {"role": "user", "content": "hi"}


def request(**fields: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"model": "m", "messages": [USER], **fields})


def test_unknown_fields_are_forwarded_and_extensions_are_not() -> None:
    chat = request(
        temperature=0.2,
        seed=7,
        conversation_id="conv_1",
        context={"planning": "never"},
        attachments=[{"content": "a document"}],
        stream=True,
    )
    assert chat.forwarded_params() == {"temperature": 0.2, "seed": 7}


def test_without_thinking_drops_reasoning_effort_only_for_anthropic() -> None:
    chat = request(thinking={"type": "enabled", "budget_tokens": 1024}, reasoning_effort="low")
    assert chat.without_thinking(anthropic=False).forwarded_params() == {"reasoning_effort": "low"}
    assert chat.without_thinking(anthropic=True).forwarded_params() == {}
    assert set(chat.forwarded_params()) == {"thinking", "reasoning_effort"}  # a copy changed


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"role": "tool", "content": "42"}, "needs 'tool_call_id'"),
        ({"role": "user"}, "needs 'content'"),
        (
            {"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f"}}]},
            "only assistant messages",
        ),
        (
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
            "tool_calls[0].function.arguments must be a string",
        ),
    ],
)
def test_a_message_of_the_wrong_shape_is_refused(message: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError, match=said.replace("[", r"\[").replace("]", r"\]")):
        request(messages=[message])


def test_user_is_bounded() -> None:
    assert request(user="u" * MAX_USER_CHARS).user == "u" * MAX_USER_CHARS
    with pytest.raises(ValidationError):
        request(user="u" * (MAX_USER_CHARS + 1))


def test_metadata_follows_openais_bounds() -> None:
    metadata = TypeAdapter(Metadata)
    sixteen = {f"k{i}": "v" for i in range(16)}
    assert metadata.validate_python(sixteen) == sixteen
    assert metadata.validate_python({"k" * 64: "v" * 512})
    with pytest.raises(ValidationError, match="at most 16 pairs"):
        metadata.validate_python({**sixteen, "k16": "v"})
    with pytest.raises(ValidationError, match="keys may have at most 64"):
        metadata.validate_python({"k" * 65: "v"})
    with pytest.raises(ValidationError, match="'k' has 513"):
        metadata.validate_python({"k": "v" * 513})


def test_unknown_fields_of_a_stored_object_are_bounded() -> None:
    check_extra_size(None)
    fits = {"note": "x" * (MAX_EXTRA_BYTES - len('{"note":""}'))}
    check_extra_size(fits)
    with pytest.raises(ValueError, match=r"unknown fields \(note\) take 16385 bytes"):
        check_extra_size({"note": fits["note"] + "x"})


def test_a_goal_given_as_a_string_is_its_task() -> None:
    assert ContextGoal.model_validate("draft the summary") == ContextGoal(task="draft the summary")
    goal = ContextGoal(task=" draft ", focus=["Q3", "revenue"], audience=" the board ")
    assert goal.describe() == "draft; focus: Q3, revenue; audience: the board"
    assert goal.query_terms() == " draft  Q3 revenue"
    with pytest.raises(ValidationError):
        ContextGoal.model_validate({"task": "t", "deadline": "friday"})


def test_context_headers_are_ascii_and_say_only_what_is_known() -> None:
    utilization = ContextUtilization(
        model_name="m", tokens_used=120, max_input_tokens=1000, cache_stats=CacheStats(cut=True)
    )
    streamed = context_headers(None, utilization)
    assert all(name.startswith(HEADER_PREFIX) for name in streamed)
    assert streamed[f"{HEADER_PREFIX}Tokens-Used"] == "120"
    assert streamed[f"{HEADER_PREFIX}Compacted"] == "false"
    assert f"{HEADER_PREFIX}Cost-Usd" not in streamed
    assert f"{HEADER_PREFIX}Thinking" not in streamed
    utilization.thinking_disabled = "the loop's thinking could not be resent"
    answered = context_headers("conv_1", utilization, CostInfo.of(0.001, 0.002, 0.0))
    assert answered["X-Conversation-Id"] == answered[f"{HEADER_PREFIX}Conversation-Id"] == "conv_1"
    assert answered[f"{HEADER_PREFIX}Cost-Usd"] == "0.00300000"
    assert answered[f"{HEADER_PREFIX}Thinking"] == "disabled"
    for name, value in answered.items():
        assert (name + value).isascii()
