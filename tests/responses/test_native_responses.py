"""The Responses door on OpenAI's own Responses API (the native path), end to end.

A real server (``contextgate serve``) driven by the openai SDK; the fake upstream serves
``POST /v1/responses`` as OpenAI does for a reasoning model: it seals every reasoning item's
``encrypted_content`` (HMAC, bound to model and item) and refuses one it did not issue or that
was altered, one without its following item, and ``include`` of encrypted reasoning for a model
that does not reason. Each continuation passing is the proof that the reasoning came back
byte-for-byte; the recorded upstream requests show what was sent (``store: false``, the full
managed input, the hosted tools).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.models import ANTHROPIC_LITELLM_MODEL
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

REASONER = "o4-mini"  # litellm knows it reasons: encrypted reasoning is asked for unprompted
NO_RESPONSES = "o3-compat"  # its server answers 404 for /responses (a fault)
NO_RESPONSES_STREAM = "o1-compat"  # the same, met first by a stream
CLAUDE = "claude-fake"
CHAT_ONLY = "fake-model"  # reached through CONTEXTGATE_UPSTREAM_BASE_URL: the chat form
AZURE = "azure-o4"  # Azure OpenAI (litellm's azure provider, /openai/responses)
PLAIN = "gpt-4.1"  # native, but does not reason: encrypted reasoning must not be asked for
ENCRYPTED = "reasoning.encrypted_content"
WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ASK = 'Weather? CALL_TOOL:get_weather:{"city": "Oslo"}'


def _models(directory: Path, fake: FakeUpstream) -> Path:
    def entry(name: str, model: str, **info: Any) -> dict[str, Any]:
        params = {"model": model, "api_base": fake.base_url, "api_key": "sk-fake"}
        return {"model_name": name, "litellm_params": params, "model_info": info}

    entries = [
        entry(REASONER, f"openai/{REASONER}", responses_api=True),
        entry(NO_RESPONSES, "openai/o3", responses_api=True),
        entry(NO_RESPONSES_STREAM, "openai/o1", responses_api=True),
        entry(PLAIN, f"openai/{PLAIN}", responses_api=True),
        {
            "model_name": AZURE,
            "litellm_params": {
                "model": "azure/o4-mini",
                "api_base": fake.url,
                "api_key": "azure-key",
                "api_version": "2025-04-01-preview",
            },
            "model_info": {"responses_api": True},
        },
        {
            "model_name": CLAUDE,
            "litellm_params": {
                "model": ANTHROPIC_LITELLM_MODEL,
                "api_base": fake.url,
                "api_key": "sk-ant-fake",
            },
        },
    ]
    path = directory / "models.yaml"
    path.write_bytes(orjson.dumps({"model_list": entries}))
    return path


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    config = _models(tmp_path_factory.mktemp("models"), fake_upstream_server)
    yield from module_server(
        tmp_path_factory, fake_upstream_server, {"CONTEXTGATE_CONFIG": str(config)}, name="native"
    )


@pytest.fixture
def sdk(server: ContextgateServer) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=60)
    yield client
    client.close()


def upstream(fake: FakeUpstream, path: str = "/v1/responses") -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests() if r["path"] == path]


def dumped(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True) for item in response.output]


def reasoning_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == "reasoning"]


def extra(response: Any) -> dict[str, Any]:
    return response.model_extra or {}


def test_encrypted_reasoning_returned_and_carried_through_previous_response_id(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    first = sdk.responses.create(
        model=REASONER,
        input=ASK,
        tools=[WEATHER],
        include=[ENCRYPTED],
        reasoning={"summary": "auto"},
    )
    kinds = [item.type for item in first.output]
    assert kinds == ["reasoning", "function_call"]
    reasoning = reasoning_of(dumped(first))[0]
    assert reasoning["encrypted_content"].startswith("gAAAAB")
    assert reasoning["summary"][0]["text"].startswith("Thinking about: Weather?")
    sent = upstream(fake_upstream)[-1]
    assert sent["store"] is False
    assert ENCRYPTED in sent["include"]
    assert sent["input"][-1]["content"] == ASK
    assert extra(first)["conversation_id"].startswith("conv_")
    assert extra(first)["context_utilization"]["tokens_used"] > 0
    assert set(extra(first)["cost"]) >= {"prompt_cost", "completion_cost", "total_cost"}

    call = first.output[1]
    assert call.type == "function_call"
    second = sdk.responses.create(
        model=REASONER,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[WEATHER],
        include=[ENCRYPTED],
    )
    assert second.output_text == "Tool results: sunny (reasoning items carried: 1)"
    carried = reasoning_of(upstream(fake_upstream)[-1]["input"])
    assert [item["encrypted_content"] for item in carried] == [reasoning["encrypted_content"]]
    assert extra(second)["conversation_id"] == extra(first)["conversation_id"]
    # The stored conversation keeps the item verbatim with the answer.
    conversation = sdk.get(
        f"/conversations/{extra(first)['conversation_id']}", cast_to=httpx.Response
    ).json()
    kept = [m for m in conversation["messages"] if m["role"] == "assistant"][0]
    assert kept["thinking_blocks"] == [{"type": "openai_item", "item": reasoning}]


def test_reasoning_kept_but_not_shown_without_include(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    first = sdk.responses.create(model=REASONER, input=ASK, tools=[WEATHER])
    assert "encrypted_content" not in reasoning_of(dumped(first))[0]
    assert ENCRYPTED in upstream(fake_upstream)[-1]["include"]  # contextgate asked for itself
    call = first.output[-1]
    assert call.type == "function_call"
    second = sdk.responses.create(
        model=REASONER,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "rain"}],
        tools=[WEATHER],
    )
    assert second.output_text.endswith("(reasoning items carried: 1)")


def test_resend_everything_with_store_false(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    opening = {"role": "user", "content": ASK}
    first = sdk.responses.create(
        model=REASONER, input=[opening], tools=[WEATHER], include=[ENCRYPTED], store=False
    )
    items = dumped(first)
    call = items[-1]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "fog"}
    second = sdk.responses.create(
        model=REASONER,
        input=[opening, *items, output],
        tools=[WEATHER],
        include=[ENCRYPTED],
        store=False,
    )
    assert second.output_text == "Tool results: fog (reasoning items carried: 1)"
    carried = reasoning_of(upstream(fake_upstream)[-1]["input"])
    assert carried[0]["encrypted_content"] == reasoning_of(items)[0]["encrypted_content"]

    # An altered item is refused by the provider, and the client hears it in OpenAI's envelope.
    forged = [dict(item) for item in items]
    forged[0]["encrypted_content"] = forged[0]["encrypted_content"][:-4] + "0000"
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.responses.create(
            model=REASONER, input=[opening, *forged, output], tools=[WEATHER], store=False
        )
    assert "could not be verified" in str(refused.value)


def test_hosted_tools_are_passed_on(sdk: openai.OpenAI, fake_upstream: FakeUpstream) -> None:
    tools: Any = [
        {"type": "web_search"},
        {"type": "file_search", "vector_store_ids": ["vs_docs"]},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        WEATHER,
    ]
    response = sdk.responses.create(model=REASONER, input="SEARCH: contextgate docs", tools=tools)
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "web_search_call", "message"]
    message = response.output[2]
    assert message.type == "message"
    annotation = message.content[0].annotations[0]  # type: ignore[union-attr]
    assert annotation.url == "https://example.com/contextgate-docs"  # type: ignore[union-attr]
    sent = upstream(fake_upstream)[-1]
    assert [tool["type"] for tool in sent["tools"]] == [
        "web_search", "file_search", "code_interpreter", "function",
    ]  # fmt: skip
    assert sent["tools"][1]["vector_store_ids"] == ["vs_docs"]
    # A hosted tool's tool_choice goes on as it is (the chat form refuses it: a 400 there).
    sdk.responses.create(
        model=REASONER, input="SEARCH: more", tools=tools, tool_choice={"type": "web_search"}
    )
    assert upstream(fake_upstream)[-1]["tool_choice"] == {"type": "web_search"}
    # The next turn (a new user message) sends the answer's text; the earlier turn's reasoning
    # and hosted call stay stored, as only the current tool loop's are sent back.
    sdk.responses.create(model=REASONER, previous_response_id=response.id, input="thanks")
    resent = upstream(fake_upstream)[-1]["input"]
    assert {"type": "message", "role": "assistant", "content": "Found: contextgate docs"} in resent
    assert [item["type"] for item in resent][-2:] == ["message", "message"]


def test_stream_passes_typed_events_and_carries_reasoning(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    with sdk.responses.stream(
        model=REASONER,
        input=ASK,
        tools=[WEATHER],
        include=[ENCRYPTED],
        reasoning={"summary": "auto"},
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.reasoning_summary_text.delta" in kinds
    assert "response.function_call_arguments.delta" in kinds
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert upstream(fake_upstream)[-1]["stream"] is True
    completed = events[-1].response  # type: ignore[union-attr]
    assert extra(completed)["conversation_id"].startswith("conv_")
    assert extra(completed)["context_utilization"]["tokens_used"] > 0
    assert "total_cost" in extra(completed)["cost"]
    reasoning = reasoning_of(dumped(final))[0]
    assert reasoning["encrypted_content"].startswith("gAAAAB")
    call = final.output[-1]
    assert call.type == "function_call"

    with sdk.responses.stream(
        model=REASONER,
        previous_response_id=final.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "snow"}],
        tools=[WEATHER],
    ) as stream:
        text = "".join(
            event.delta for event in stream if event.type == "response.output_text.delta"
        )
    assert text == "Tool results: snow (reasoning items carried: 1)"
    carried = reasoning_of(upstream(fake_upstream)[-1]["input"])
    assert carried[0]["encrypted_content"] == reasoning["encrypted_content"]


def test_a_client_that_leaves_stops_the_upstream_and_keeps_the_partial(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults(REASONER, [{"chunk_delay_ms": 100}])
    words = " ".join(f"w{i}" for i in range(60))
    body = {"model": REASONER, "input": words, "stream": True}
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        with http.stream("POST", "/responses", json=body) as response:
            assert response.status_code == 200
            conversation_id = response.headers["x-conversation-id"]
            seen = 0
            for line in response.iter_lines():
                seen += line.startswith("event: response.output_text.delta")
                if seen >= 3:
                    break
        left = time.monotonic()
        # Bounded poll: how fast is measured in bench/, not asserted here.
        while fake_upstream.stats()["disconnects"] < 1 and time.monotonic() - left < 10:
            time.sleep(0.02)
        assert fake_upstream.stats()["disconnects"] == 1
        for _ in range(200):  # the partial answer is saved in the background
            detail = http.get(f"/conversations/{conversation_id}").json()
            if detail.get("message_count", 0) >= 2:
                break
            time.sleep(0.05)
    answer = detail["messages"][-1]
    assert (answer["role"], answer["status"]) == ("assistant", "incomplete")
    assert answer["content"].startswith("Echo: w0")
    assert answer["thinking_blocks"][0]["item"]["type"] == "reasoning"


def test_a_model_that_does_not_reason(sdk: openai.OpenAI, fake_upstream: FakeUpstream) -> None:
    # The fake refuses include of encrypted reasoning for it, as OpenAI does.
    response = sdk.responses.create(model=PLAIN, input="hi", instructions="Be brief.")
    assert [item.type for item in response.output] == ["message"]
    assert response.output_text == "Echo: hi"
    sent = upstream(fake_upstream)[-1]
    assert "include" not in sent
    assert sent["input"] == [
        {"type": "message", "role": "system", "content": "Be brief."},
        {"type": "message", "role": "user", "content": "hi"},
    ]
    assert response.instructions == "Be brief."


def test_other_models_keep_the_chat_form(sdk: openai.OpenAI, fake_upstream: FakeUpstream) -> None:
    chat = sdk.responses.create(model=CHAT_ONLY, input="plain", tools=[{"type": "web_search"}])
    assert chat.output_text == "Echo: plain"
    claude = sdk.responses.create(model=CLAUDE, input="hello claude")
    assert claude.output_text == "Echo: hello claude"
    paths = [r["path"] for r in fake_upstream.requests()]
    assert "/v1/responses" not in paths
    assert "/v1/chat/completions" in paths
    assert "/v1/messages" in paths


def test_no_responses_api_upstream_falls_back_to_the_chat_form(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults("o3", [{"status": 404, "body": {"detail": "Not Found"}}])
    first = sdk.responses.create(model=NO_RESPONSES, input="first")
    assert first.output_text == "Echo: first"
    paths = [r["path"] for r in fake_upstream.requests()]
    assert paths == ["/v1/responses", "/v1/chat/completions"]
    fake_upstream.reset()
    with sdk.responses.stream(model=NO_RESPONSES, input="second") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Echo: second"
    assert [r["path"] for r in fake_upstream.requests()] == ["/v1/chat/completions"]


def test_a_stream_falls_back_to_the_chat_form_too(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.faults("o1", [{"status": 405, "body": "Method Not Allowed"}])
    with sdk.responses.stream(model=NO_RESPONSES_STREAM, input="streamed") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == "Echo: streamed"
    assert kinds[-1] == "response.completed"
    assert [r["path"] for r in fake_upstream.requests()] == [
        "/v1/responses",
        "/v1/chat/completions",
    ]


def test_azure_openai_goes_native_too(sdk: openai.OpenAI, fake_upstream: FakeUpstream) -> None:
    first = sdk.responses.create(model=AZURE, input=ASK, tools=[WEATHER])
    call = first.output[-1]
    assert call.type == "function_call"
    second = sdk.responses.create(
        model=AZURE,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "mild"}],
        tools=[WEATHER],
    )
    assert second.output_text == "Tool results: mild (reasoning items carried: 1)"
    calls = [r for r in fake_upstream.requests() if r["path"] == "/openai/responses"]
    assert len(calls) == 2
    assert calls[0]["headers"]["api-key"] == "azure-key"
    assert calls[1]["body"]["store"] is False
