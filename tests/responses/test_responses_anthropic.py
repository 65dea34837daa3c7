"""The Responses door in front of an Anthropic model (litellm's anthropic provider, reaching the
fake upstream's Anthropic /v1/messages): extended thinking in a tool loop.

The fake signs every thinking block it issues and rejects a tool loop whose thinking does not
come back byte-for-byte, so each continuation below passing is the proof: through
``previous_response_id`` (contextgate resends what it stored) and through the reasoning item's
``encrypted_content`` when the client resends the items itself with ``store: false``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.models import fake_model_list
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

CLAUDE = "claude-fake"
WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ASK = 'Weather? CALL_TOOL:get_weather:{"city": "Oslo"}'


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    config = fake_model_list(
        tmp_path_factory.mktemp("models"), fake_upstream_server, names=(), anthropic=(CLAUDE,)
    )
    yield from module_server(
        tmp_path_factory, fake_upstream_server, {"CONTEXTGATE_CONFIG": str(config)}, name="rant"
    )


@pytest.fixture
def sdk(server: ContextgateServer) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=60)
    yield client
    client.close()


def anthropic_calls(fake: FakeUpstream) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests() if r["path"].endswith("/v1/messages")]


def ask(sdk: openai.OpenAI, **fields: Any) -> Any:
    return sdk.responses.create(
        model=CLAUDE,
        tools=[WEATHER],
        reasoning={"effort": "low"},
        max_output_tokens=4096,
        **fields,
    )


def test_thinking_comes_back_through_previous_response_id(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    first = ask(sdk, input=ASK)
    kinds = [item.type for item in first.output]
    assert kinds[0] == "reasoning"
    assert "function_call" in kinds
    assert first.output[0].encrypted_content.startswith("cg1:")
    call = next(item for item in first.output if item.type == "function_call")
    second = ask(
        sdk,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "cold"}],
    )
    assert second.output_text.endswith("Tool results: cold")
    resent = anthropic_calls(fake_upstream)[-1]["messages"][-2]
    assert resent["role"] == "assistant"
    assert resent["content"][0]["type"] == "thinking"


def test_thinking_comes_back_from_the_clients_own_items(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    first = ask(sdk, input=ASK, store=False)
    items = [item.model_dump(exclude_none=True) for item in first.output]
    call = next(item for item in items if item["type"] == "function_call")
    history = [
        {"role": "user", "content": ASK},
        *items,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "mild"},
    ]
    second = ask(sdk, input=history, store=False)
    assert second.output_text.endswith("Tool results: mild")
    resent = anthropic_calls(fake_upstream)[-1]["messages"][-2]
    issued = anthropic_calls(fake_upstream)[0]
    assert resent["content"][0]["type"] == "thinking"
    assert issued["thinking"]["type"] == "enabled"


def test_changed_instructions_mid_loop_rebase_and_keep_the_thinking(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    """Other instructions mid-loop change what precedes the loop's answer: the prompt owner
    rebuilds the prompt (a rebase, and why), and the loop's signed thinking still goes back
    with extended thinking on: signatures cover the thinking itself, which the fake upstream
    (like Anthropic) checks."""
    first = ask(sdk, input=ASK, instructions="Answer in English.")
    call = next(item for item in first.output if item.type == "function_call")
    output = [{"type": "function_call_output", "call_id": call.call_id, "output": "windy"}]
    second = ask(sdk, previous_response_id=first.id, input=output, instructions="Be brief.")
    assert second.status == "completed"
    assert second.output_text.endswith("Tool results: windy")
    sent = anthropic_calls(fake_upstream)[-1]
    assert sent["thinking"]["type"] == "enabled"
    blocks = [b for m in sent["messages"] for b in m["content"] if isinstance(b, dict)]
    assert [b for b in blocks if b.get("type") == "thinking"]
    utilization = second.model_extra["context_utilization"]
    assert utilization["thinking_disabled"] is None
    assert utilization["cache_stats"]["rebased"] is True
    assert "system prompt changed" in utilization["cache_stats"]["rebase_reason"]
    assert utilization["cache_stats"]["prefix_kept"] is False


def test_unchanged_instructions_keep_the_thinking_and_the_previous_prompt(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    first = ask(sdk, input=ASK, instructions="Answer in English.")
    call = next(item for item in first.output if item.type == "function_call")
    output = [{"type": "function_call_output", "call_id": call.call_id, "output": "calm"}]
    second = ask(
        sdk, previous_response_id=first.id, input=output, instructions="Answer in English."
    )
    sent = anthropic_calls(fake_upstream)[-1]
    assert sent["thinking"]["type"] == "enabled"
    assert sent["messages"][-2]["content"][0]["type"] == "thinking"
    utilization = second.model_extra["context_utilization"]
    assert utilization["notes"] == []
    assert utilization["cache_stats"]["prefix_kept"] is True
