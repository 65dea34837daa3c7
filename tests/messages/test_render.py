"""Upstream chat chunks → Anthropic's SSE events, block by block."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson

from app.llm.responses import Usage
from app.messages.render import AnthropicStreamRenderer, message_body


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": None}


def decode(frames: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in frames:
        head, data = frame.decode().strip().split("\n")
        events.append((head.removeprefix("event: "), orjson.loads(data.removeprefix("data: "))))
    return events


def fake_result(message: dict[str, Any], finish: str) -> Any:
    usage = Usage(
        120, 9, {"prompt_tokens": 120, "completion_tokens": 9, "cache_read_input_tokens": 100}
    )
    prepared = SimpleNamespace(request=SimpleNamespace(model="claude"))
    return SimpleNamespace(
        prepared=prepared,
        message=message,
        finish_reason=finish,
        usage=usage,
        extensions=lambda: {
            "conversation_id": "conv_1",
            "context_utilization": {"strategy": "simple"},
        },
    )


def test_blocks_open_and_close_in_order() -> None:
    prepared: Any = SimpleNamespace(
        request=SimpleNamespace(model="claude"), utilization=SimpleNamespace(tokens_used=42)
    )
    renderer = AnthropicStreamRenderer(prepared, "msg_1")
    frames = renderer.start()
    frames += renderer.chunk(
        chunk(
            {"reasoning_content": "Hm", "thinking_blocks": [{"type": "thinking", "thinking": "Hm"}]}
        )
    )
    frames += renderer.chunk(
        chunk({"thinking_blocks": [{"type": "thinking", "thinking": "", "signature": "s1"}]})
    )
    frames += renderer.chunk(
        chunk({"thinking_blocks": [{"type": "redacted_thinking", "data": "r1"}]})
    )
    frames += renderer.chunk(chunk({"content": "Let "}))
    frames += renderer.chunk(chunk({"content": "me."}))
    call = {
        "index": 0,
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "ls", "arguments": ""},
    }
    frames += renderer.chunk(chunk({"tool_calls": [call]}))
    frames += renderer.chunk(
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]})
    )
    frames += renderer.chunk(chunk({}, "tool_calls"))
    message = {"role": "assistant", "content": "Let me.", "tool_calls": [call]}
    frames += renderer.finish(fake_result(message, "tool_calls"))
    events = decode(frames)
    names = [name for name, _ in events]
    assert names == [
        "message_start", "ping",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]  # fmt: skip
    assert events[0][1]["message"]["usage"]["input_tokens"] == 42
    starts = [data for name, data in events if name == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1, 2, 3]
    assert starts[0]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert starts[1]["content_block"] == {"type": "redacted_thinking", "data": "r1"}
    assert starts[3]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "ls",
        "input": {},
    }
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert deltas[:2] == [
        {"type": "thinking_delta", "thinking": "Hm"},
        {"type": "signature_delta", "signature": "s1"},
    ]
    assert deltas[-1] == {"type": "input_json_delta", "partial_json": '{"a": 1}'}
    final = events[-2][1]
    assert final["delta"]["stop_reason"] == "tool_use"
    assert final["usage"]["cache_read_input_tokens"] == 100
    assert final["usage"]["input_tokens"] == 20
    assert final["conversation_id"] == "conv_1"


def test_message_body() -> None:
    body = message_body(fake_result({"role": "assistant", "content": "Hi."}, "length"), "msg_2")
    assert body["type"] == "message"
    assert body["id"] == "msg_2"
    assert body["content"] == [{"type": "text", "text": "Hi."}]
    assert body["stop_reason"] == "max_tokens"
    assert body["usage"]["output_tokens"] == 9
    assert body["context_utilization"] == {"strategy": "simple"}
