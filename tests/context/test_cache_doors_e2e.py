"""The cache-aware fit through a running server on the Anthropic and Responses doors: the
consecutive prompts the fake upstream got, under a small budget with the tools counted.

Like tests/context/test_cache_e2e.py (the chat door): each prompt keeps the previous one as a
byte-identical prefix until a deep rebase, old tool results become placeholders, tool calls
keep their results, and no prompt is over the budget, tool definitions included. And the
per-turn blocks (the user's memories, the date) are frozen with the user message they were
made for, so the calls of a tool loop keep the prefix even when the memories change meanwhile.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.context.cache_doors import (
    BUDGET,
    Loop,
    check_cache_aware_loop,
    messages_loop,
    prompts,
    rebases,
    responses_loop,
)
from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

CACHE = {
    "high_water_ratio": 1.0,
    "low_water_ratio": 0.4,
    "keep_tool_results": 1,
    "clear_at_least_tokens": 300,
}
CONTEXT = {"max_input_tokens": BUDGET, "cache": CACHE}
STEPS = 14


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    # Message recall stays on (the default); compaction never runs in the background.
    yield from module_server(
        tmp_path_factory,
        fake_upstream_server,
        {"CONTEXTGATE_COMPACTION_RATIO": "1.0"},
        name="cache-doors",
    )


@pytest.fixture
def claude_code(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> Iterator[anthropic.Anthropic]:
    sdk = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=60)
    yield sdk
    sdk.close()


@pytest.fixture
def sdk(server: ContextgateServer, fake_upstream: FakeUpstream) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=60)
    yield client
    client.close()


def test_messages_door_keeps_the_prefix_until_a_deep_cut(
    claude_code: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    loop = Loop()
    messages_loop(claude_code, STEPS, CONTEXT, loop)
    assert len(loop.usages) == 2 * STEPS
    sent = prompts(fake_upstream)
    check_cache_aware_loop(sent, loop.usages)
    assert all(p.messages[0] == {"role": "system", "content": sent[0].messages[0]["content"]}
               for p in sent)  # fmt: skip


def test_responses_door_resending_its_input_keeps_the_prefix_until_a_deep_cut(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    loop = Loop()
    responses_loop(sdk, STEPS, CONTEXT, loop, chained=False)
    check_cache_aware_loop(prompts(fake_upstream), loop.usages)


def test_responses_door_with_instructions_and_previous_response_id(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    loop = Loop()
    responses_loop(sdk, STEPS, CONTEXT, loop, chained=True)
    sent = prompts(fake_upstream)
    check_cache_aware_loop(sent, loop.usages)
    # The instructions are sent first on every call, the same bytes, never stored twice.
    assert all(p.messages[0]["role"] == "system" for p in sent)
    assert all(sum(m["role"] == "system" for m in p.messages) == 1 for p in sent)


def _add_fact(server: ContextgateServer, user: str, key: str, value: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response = http.post("/v1/memories", json={"user": user, "key": key, "value": value})
        assert response.status_code == 200, response.text


def _user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "user"]


@pytest.mark.parametrize("door", ["messages", "responses"])
def test_per_turn_blocks_stay_frozen_across_the_calls_of_a_tool_loop(
    server: ContextgateServer,
    claude_code: anthropic.Anthropic,
    sdk: openai.OpenAI,
    fake_upstream: FakeUpstream,
    door: str,
) -> None:
    user = f"dev-{uuid.uuid4().hex[:8]}"
    _add_fact(server, user, "language", "python")
    editor = f"vim-{uuid.uuid4().hex[:6]}"
    # A memory added in the middle of step 0's tool loop (after its first call): the loop's
    # second call must not get a new block for it, which would rewrite the cached prefix.
    loop = Loop(between={1: lambda: _add_fact(server, user, "editor", editor)})
    context = {"max_input_tokens": 20_000, "date_prefix": True}
    if door == "messages":
        messages_loop(claude_code, 3, context, loop, user=user)
    else:
        responses_loop(sdk, 3, context, loop, chained=True, user=user)
    sent = [p.messages for p in prompts(fake_upstream)]
    assert len(sent) == 6
    assert not rebases(loop.usages)
    for i in range(1, len(sent)):
        assert sent[i][: len(sent[i - 1])] == sent[i - 1], f"call {i} rewrote the prefix"
    # Every user message carries the block made for it: the date and the user's facts.
    first = _user_texts(sent[0])[-1]
    assert first.startswith("[CONTEXT: ")
    assert "python" in first
    assert "Step 0" in first
    assert all(editor not in str(m["content"]) for m in sent[1])
    newest = _user_texts(sent[2])[-1]
    assert newest.startswith("[CONTEXT: ")
    assert editor in newest
    assert "Step 1" in newest
    assert _user_texts(sent[-1])[0] == first  # step 0's block, as first sent, to the end
    reported = [bool(u["memories_injected"]) for u in loop.usages]
    assert reported == [True, False] * 3  # made for a new user message only
