"""``instructions`` are per request, as OpenAI says: "When used along with
previous_response_id, the instructions from a previous response will not be carried over to
the next response." Each request's instructions are the system prompt sent for it (none
without them), the conversation stores no instructions, and each response keeps its own.
Unchanged instructions across an agent loop give a byte-identical prompt prefix."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "gpt-4o-mini"
READ: Any = {
    "type": "function",
    "name": "read_file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(tmp_path_factory, fake_upstream_server, name="instructions")


@pytest.fixture
def sdk(server: ContextgateServer, fake_upstream: FakeUpstream) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=30)
    yield client
    client.close()


def prompts(fake: FakeUpstream) -> list[list[dict[str, Any]]]:
    return [
        r["body"]["messages"] for r in fake.requests() if r["path"].endswith("/chat/completions")
    ]


def conversation_of(response: Any) -> str:
    conversation_id: str = (response.model_extra or {})["conversation_id"]
    return conversation_id


def stored(server: ContextgateServer, conversation_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.base_url}/conversations/{conversation_id}")
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def test_each_request_sends_its_own_instructions_and_none_carry_over(
    sdk: openai.OpenAI, server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    r1 = sdk.responses.create(model=MODEL, input="one", instructions="Be brief.")
    r2 = sdk.responses.create(
        model=MODEL, input="two", instructions="Answer in French.", previous_response_id=r1.id
    )
    r3 = sdk.responses.create(model=MODEL, input="three", previous_response_id=r2.id)
    first, second, third = prompts(fake_upstream)
    assert first == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
    ]
    # The new instructions replace the old ones: one system prompt, the request's own.
    assert second == [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "Echo: one"},
        {"role": "user", "content": "two"},
    ]
    # No instructions: no system prompt at all.
    assert [m["role"] for m in third] == ["user", "assistant", "user", "assistant", "user"]
    # One conversation, holding the turns and no instructions; each response its own.
    conversation = conversation_of(r1)
    assert conversation_of(r2) == conversation_of(r3) == conversation
    assert [m["role"] for m in stored(server, conversation)] == ["user", "assistant"] * 3
    got = [sdk.responses.retrieve(r.id).instructions for r in (r1, r2, r3)]
    assert got == ["Be brief.", "Answer in French.", None]
    assert [i.role for i in sdk.responses.input_items.list(r2.id).data] == ["user"]  # type: ignore[union-attr]


def test_a_client_resending_everything_may_change_the_instructions(
    sdk: openai.OpenAI, server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    """Without previous_response_id (the Agents SDK's default), the conversation is found by
    its input; the instructions of each request are still its own."""
    r1 = sdk.responses.create(model=MODEL, input="alpha", instructions="Old rules.")
    r2 = sdk.responses.create(
        model=MODEL,
        instructions="New rules.",
        input=[
            {"role": "user", "content": "alpha"},
            {"role": "assistant", "content": r1.output_text},
            {"role": "user", "content": "beta"},
        ],
    )
    assert conversation_of(r2) == conversation_of(r1)
    assert prompts(fake_upstream)[-1] == [
        {"role": "system", "content": "New rules."},
        {"role": "user", "content": "alpha"},
        {"role": "assistant", "content": "Echo: alpha"},
        {"role": "user", "content": "beta"},
    ]
    assert [m["content"] for m in stored(server, conversation_of(r2))] == [
        "alpha", "Echo: alpha", "beta", "Echo: beta",
    ]  # fmt: skip


def test_unchanged_instructions_keep_an_agent_loops_prefix_byte_identical(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    steps = 4
    fake_upstream.script(
        MODEL,
        [{"tool_calls": [{"name": "read_file", "arguments": f'{{"path": "f{i}.py"}}'}]}
         for i in range(steps)] + ["done"],
    )  # fmt: skip
    instructions = "You are a coding agent. " * 40
    response = sdk.responses.create(
        model=MODEL, instructions=instructions, input="Fix the bug.", tools=[READ]
    )
    for step in range(steps):
        call = response.output[-1]
        assert call.type == "function_call"
        response = sdk.responses.create(
            model=MODEL,
            instructions=instructions,
            previous_response_id=response.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": f"{step}"}],
            tools=[READ],
        )
    assert response.output_text == "done"
    sent = prompts(fake_upstream)
    assert len(sent) == steps + 1
    for before, after in zip(sent, sent[1:], strict=False):
        assert after[0] == {"role": "system", "content": instructions}
        # Each prompt is the previous one, byte for byte, plus the call and its result.
        assert orjson.dumps(after[: len(before)]) == orjson.dumps(before)
        assert [m["role"] for m in after[len(before) :]] == ["assistant", "tool"]
    assert sum(m["role"] == "system" for m in sent[-1]) == 1
