"""litellm's response objects become OpenAI's exact wire shapes."""

from __future__ import annotations

from litellm.types.utils import Delta, ModelResponse, ModelResponseStream, StreamingChoices

from app.llm.responses import normalize_chunk, normalize_completion, usage_of


def test_completion_keeps_openais_fields_only() -> None:
    raw = ModelResponse(
        id="chatcmpl-1",
        created=123,
        model="openai/fake",
        choices=[
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "lookup", "arguments": '{"q": 1}'}}
                    ],
                },
            }
        ],
        usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    )  # fmt: skip
    out = normalize_completion(raw, "fake")
    assert out["object"] == "chat.completion"
    assert out["model"] == "fake"
    assert out["id"] == "chatcmpl-1"
    assert out["created"] == 123
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": 1}'},
            }
        ],
    }
    assert out["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def test_completion_passes_reasoning_content() -> None:
    raw = {
        "choices": [{"message": {"role": "assistant", "content": "4", "reasoning_content": "2+2"}}]
    }
    out = normalize_completion(raw, "m")
    assert out["choices"][0]["message"]["reasoning_content"] == "2+2"
    assert out["choices"][0]["finish_reason"] == "stop"
    assert "usage" not in out


def test_chunk_deltas_are_clean() -> None:
    raw = ModelResponseStream(
        id="c",
        created=1,
        choices=[StreamingChoices(index=0, delta=Delta(content="Hel"), finish_reason=None)],
    )
    chunk = normalize_chunk(raw)
    assert chunk["choices"] == [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]
    assert chunk["usage"] is None


def test_usage_of() -> None:
    assert usage_of(None) is None
    usage = usage_of({"prompt_tokens": 3, "completion_tokens": None})
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (3, 0)
