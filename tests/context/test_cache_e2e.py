"""The cache-aware fit through a running server: consecutive prompts as the upstream got them."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.models import fake_model_list
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "fake-model"
CLAUDE = "claude-fake"
BUDGET = 3000
WORDS = "def class return import self value result config request token cache prefix".split()
TOOLS: Any = [
    {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": {}}},
    }
    for name in ("read_file", "grep")
]


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    directory: Path = tmp_path_factory.mktemp("cache-models")
    config = fake_model_list(directory, fake_upstream_server, anthropic=(CLAUDE,))
    yield from module_server(
        tmp_path_factory,
        fake_upstream_server,
        # Message recall stays on (the default): its block is made for a new user message and
        # frozen with it, so it must not rewrite the prefix either.
        {"CONTEXTGATE_CONFIG": str(config), "CONTEXTGATE_COMPACTION_RATIO": "1.0"},
        name="cache",
    )


@pytest.fixture
def sdk(server: ContextgateServer) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=60)
    yield client
    client.close()


def _result(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _prompts(fake: FakeUpstream, model: str) -> list[list[dict[str, Any]]]:
    return [
        r["body"]["messages"]
        for r in fake.requests()
        if r["path"].endswith("/chat/completions") and r["body"].get("model") == model
    ]


def _pairs_intact(prompt: list[dict[str, Any]]) -> bool:
    calls = [str(c["id"]) for m in prompt for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in prompt if m["role"] == "tool"]
    return sorted(calls) == sorted(results)


def agent_loop(
    sdk: openai.OpenAI, steps: int, cache: dict[str, Any], tool: str = "read_file"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Runs the loop, whole history resent; returns the messages and each call's utilization."""
    rng = random.Random(3)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"You are an agent. Run {rng.random()}."}
    ]
    usages: list[dict[str, Any]] = []
    context = {"max_input_tokens": BUDGET, "cache": cache}

    def call() -> dict[str, Any]:
        response = sdk.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, extra_body={"context": context}
        )
        usages.append((response.model_extra or {})["context_utilization"])
        return response.choices[0].message.model_dump(
            include={"role", "content", "tool_calls"}, exclude_none=True
        )

    for step in range(steps):
        messages.append({"role": "user", "content": f"Step {step}. CALL_TOOL:{tool}:{{}}"})
        answer = call()
        messages.append(answer)
        for tool_call in answer["tool_calls"]:
            content = _result(rng, rng.randint(250, 450))
            messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": content})
        messages.append(call())
    return messages, usages


def test_prompts_keep_their_prefix_until_a_deep_cut_with_placeholders(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    cache = {"low_water_ratio": 0.4, "keep_tool_results": 1, "clear_at_least_tokens": 300}
    messages, usages = agent_loop(sdk, 14, cache)
    prompts = _prompts(fake_upstream, MODEL)
    assert len(prompts) == len(usages) == 28
    rebases = [i for i, u in enumerate(usages) if i and not u["cache_stats"]["prefix_kept"]]
    assert rebases, "the loop outgrows the budget"
    assert len(rebases) <= len(usages) // 4
    for i in range(1, len(prompts)):
        previous, prompt = prompts[i - 1], prompts[i]
        if i not in rebases:
            assert prompt[: len(previous)] == previous, f"call {i} rewrote the prefix"
        assert usages[i]["tokens_used"] <= BUDGET
        assert _pairs_intact(prompt)
    # Recalled messages came back after the cut, and still no call rewrote its prefix.
    assert any(u["messages_recalled"] for u in usages)
    first = rebases[0]
    stats = usages[first]["cache_stats"]
    assert stats["cleared_now"], "the rebase cleared old tool results in a batch"
    assert sum(c["tokens"] for c in stats["cleared_now"]) >= 300
    # Deep: well below the budget afterwards, so following calls keep the new prefix.
    assert usages[first]["tokens_used"] < 0.75 * usages[first - 1]["tokens_used"]
    placeholders = [
        m for m in prompts[first] if m["role"] == "tool" and "cleared" in str(m["content"])
    ]
    cleared = stats["cleared_now"][0]
    assert any(
        cleared["tool_call_id"] in m["content"] and "read_file" in m["content"]
        for m in placeholders
    )
    # The first rebase's placeholders are exactly the batch it reports as cleared.
    assert {m["tool_call_id"] for m in placeholders} == {
        c["tool_call_id"] for c in stats["cleared_now"]
    }
    # The newest tool result is always sent raw, as the client sent it.
    newest = [m for m in messages if m["role"] == "tool"][-1]
    assert newest in prompts[-1]
    # The cleared set only grows: a placeholder stays a placeholder in every later prompt.
    for later in prompts[first + 1 :]:
        ids = {m["tool_call_id"]: m["content"] for m in later if m["role"] == "tool"}
        for message in placeholders:
            if message["tool_call_id"] in ids:
                assert ids[message["tool_call_id"]] == message["content"]


def test_excluded_tools_are_never_cleared_and_the_loop_still_fits(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    cache = {
        "low_water_ratio": 0.4,
        "keep_tool_results": 1,
        "clear_at_least_tokens": 100,
        "exclude_tools": ["grep"],
    }
    _, usages = agent_loop(sdk, 12, cache, tool="grep")
    prompts = _prompts(fake_upstream, MODEL)
    assert all("cleared" not in str(m["content"]) for p in prompts for m in p)
    assert all(u["tokens_used"] <= BUDGET for u in usages)
    assert any(u["cache_stats"]["cut"] for u in usages), "cut instead of clearing"
    assert all(_pairs_intact(p) for p in prompts)


def test_cache_disabled_per_request_sends_the_previous_fit(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    _, usages = agent_loop(sdk, 8, {"enabled": False})
    prompts = _prompts(fake_upstream, MODEL)
    assert all("cleared" not in str(m["content"]) for p in prompts for m in p)
    assert all(not u["cache_stats"]["prefix_kept"] for u in usages)


def _anthropic_bodies(fake: FakeUpstream) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests() if r["path"].endswith("/messages")]


def _breakpoints(body: dict[str, Any]) -> int:
    system = body.get("system")
    count = sum(1 for b in system if b.get("cache_control")) if isinstance(system, list) else 0
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for b in content if b.get("cache_control"))
    return count


def test_anthropic_models_get_breakpoints_and_cache_tokens_are_reported(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "You are terse. " * 50},
        {"role": "user", "content": "first question"},
    ]
    first = sdk.chat.completions.create(model=CLAUDE, messages=messages, max_tokens=100)
    messages += [
        first.choices[0].message.model_dump(include={"role", "content"}),
        {"role": "user", "content": "second question"},
    ]
    second = sdk.chat.completions.create(model=CLAUDE, messages=messages, max_tokens=100)
    bodies = _anthropic_bodies(fake_upstream)
    assert len(bodies) == 2
    for body in bodies:
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert 2 <= _breakpoints(body) <= 4
    # The second prompt marks the end of the previous prompt, kept as its prefix (the first
    # question: where the first call's cache write ended) and its own end.
    kept = bodies[1]["messages"][0]
    assert kept["content"] == bodies[0]["messages"][0]["content"]
    assert bodies[1]["messages"][:1] == bodies[0]["messages"]
    assert bodies[1]["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    for response in (first, second):
        stats = (response.model_extra or {})["context_utilization"]["cache_stats"]
        usage = response.usage.model_extra if response.usage else {}
        assert stats["cache_write_tokens"] > 0 or stats["cached_tokens"] > 0
        assert (usage or {}).get("cache_creation_input_tokens", 0) == stats["cache_write_tokens"]


def test_a_clients_own_cache_control_is_kept_as_sent(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    system = [
        {"type": "text", "text": "Own breakpoint. " * 40, "cache_control": {"type": "ephemeral"}}
    ]
    messages: Any = [
        {"role": "system", "content": system},
        {"role": "user", "content": "hello there"},
    ]
    sdk.chat.completions.create(model=CLAUDE, messages=messages, max_tokens=50)
    [body] = _anthropic_bodies(fake_upstream)
    assert _breakpoints(body) == 1
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert all(not isinstance(m["content"], list) or not any(
        b.get("cache_control") for b in m["content"]) for m in body["messages"])  # fmt: skip
