"""The Responses stream renderer: OpenAI's typed events, validated by the openai SDK's types."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from app.core.errors import UpstreamError
from app.llm.responses import Usage
from app.responses.objects import echo_fields
from app.responses.render import ResponsesRenderer
from app.responses.schemas import ResponsesRequest
from app.responses.translate import decode_reasoning

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def renderer() -> ResponsesRenderer:
    body = ResponsesRequest.model_validate({"model": "m", "input": "hi"})
    return ResponsesRenderer(
        response_id="resp_x", created_at=1, echo=echo_fields(body), conversation_id="conv_1"
    )


def chunk(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def decode(frames: list[bytes]) -> list[dict[str, Any]]:
    events = []
    for frame in frames:
        head, data = frame.decode().split("\n", 1)
        event = orjson.loads(data.removeprefix("data: "))
        assert head == f"event: {event['type']}"
        EVENTS.validate_python(event)
        events.append(event)
    return events


def result(message: dict[str, Any], finish: str = "stop") -> Any:
    utilization = SimpleNamespace(model_dump=lambda mode: {"tokens_used": 7})
    return SimpleNamespace(
        message=message,
        finish_reason=finish,
        usage=Usage(3, 4, {}),
        conversation_id="conv_1",
        prepared=SimpleNamespace(utilization=utilization),
    )


def test_reasoning_text_and_tool_calls_stream_as_typed_events() -> None:
    r = renderer()
    thinking = [{"type": "thinking", "thinking": "deep", "signature": "s1"}]
    frames = r.start()
    frames += r.chunk(chunk(role="assistant", content=""))
    frames += r.chunk(chunk(reasoning_content="deep", thinking_blocks=thinking))
    frames += r.chunk(chunk(content="Hello "))
    frames += r.chunk(chunk(content="world"))
    frames += r.chunk(
        chunk(
            tool_calls=[
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": ""},
                }
            ]
        )
    )
    frames += r.chunk(chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"a":'}}]))
    frames += r.chunk(chunk(tool_calls=[{"index": 0, "function": {"arguments": "1}"}}]))
    message = {
        "role": "assistant",
        "content": "Hello world",
        "reasoning_content": "deep",
        "thinking_blocks": thinking,
        "tool_calls": [{"id": "call_1", "function": {"name": "f", "arguments": '{"a":1}'}}],
    }
    frames += r.finish(result(message, "tool_calls"))
    events = decode(frames)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for kind in (
        "response.reasoning_summary_text.delta",
        "response.content_part.added",
        "response.output_text.done",
        "response.function_call_arguments.done",
    ):
        assert kind in kinds
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "Hello world"
    args = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert (args["name"], args["arguments"]) == ("f", '{"a":1}')
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call"]
    assert final["output"][2]["call_id"] == "call_1"
    assert decode_reasoning(final["output"][0]["encrypted_content"]) == thinking
    assert final["usage"]["total_tokens"] == 7
    assert final["conversation_id"] == "conv_1"
    assert final["context_utilization"] == {"tokens_used": 7}
    # Every item that was added is done, in output order.
    added = [e["output_index"] for e in events if e["type"] == "response.output_item.added"]
    done = [e["output_index"] for e in events if e["type"] == "response.output_item.done"]
    assert added == done == [0, 1, 2]


def test_a_cut_answer_is_incomplete_and_a_failure_is_response_failed() -> None:
    r = renderer()
    frames = r.start() + r.chunk(chunk(content="partial"))
    frames += r.finish(result({"role": "assistant", "content": "partial"}, "length"))
    last = decode(frames)[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}

    r = renderer()
    frames = r.start() + r.chunk(chunk(content="x"))
    frames += r.fail(UpstreamError("upstream broke", code="upstream_error"))
    failed = decode(frames)[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {
        "code": "server_error",
        "message": "upstream broke (upstream_error)",
    }
