"""Issue 14: tool definitions count in the budget; a request's ``exclude_tools`` adds to the
deployment's list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from app.context.budget import TokenBudget, count_tools
from app.context.cache_policy import cache_policy
from app.core.settings import Settings
from app.protocol.chat import CacheOptions
from app.tokens.counter import REPLY_PRIMER, TokenCounter
from bench.agent_loop import Run
from tests.fake_upstream import FakeUpstream

MODEL = "agent-model"  # not a helper model: its prompts are the loop's only
BUDGET = 3000
COUNTER = TokenCounter()
WORDS = "read the file at the given path and return its lines with numbers".split()


def tool_list(count: int, words: int) -> list[dict[str, Any]]:
    """``count`` tools with long descriptions, like a coding agent's."""
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{index}",
                "description": " ".join(WORDS[(index + n) % len(WORDS)] for n in range(words)),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Absolute path"},
                        "limit": {"type": "integer", "description": "Lines to read"},
                    },
                    "required": ["path"],
                },
            },
        }
        for index in range(count)
    ]


def tools_tokens(tools: list[dict[str, Any]], model: str = MODEL) -> int:
    return COUNTER.count_text(orjson.dumps(tools).decode(), model)


def test_the_budget_keeps_room_for_the_tools() -> None:
    budget = TokenBudget(1000, system=10, current=20, tools=300)
    assert budget.fixed == REPLY_PRIMER + 10 + 300 + 20
    assert budget.history_room == 1000 - budget.fixed


class _Spy(TokenCounter):
    def __init__(self) -> None:
        super().__init__(large_text_chars=2000)
        self.counted: list[int] = []
        self.pooled: list[int] = []

    def count_text(self, text: str, model: str) -> int:
        self.counted.append(len(text))
        return super().count_text(text, model)

    async def precount(self, texts: Any, model: str) -> None:
        texts = list(texts)
        self.pooled += [len(t) for t in texts if not self.is_counted(t, model)]
        await super().precount(texts, model)


async def test_tools_are_counted_once_per_tool_set_and_large_ones_in_the_pool() -> None:
    spy = _Spy()
    tools = tool_list(6, 60)
    expected = tools_tokens(tools)
    assert await count_tools(spy, tools, MODEL) == expected
    assert spy.pooled, "a large tool set is counted in the token pool, off the event loop"
    spy.counted.clear()
    # The next call of the loop resends an equal list: answered from the hash, no encoding.
    assert await count_tools(spy, orjson.loads(orjson.dumps(tools)), MODEL) == expected
    assert spy.counted == []
    assert await count_tools(spy, None, MODEL) == 0
    changed = tool_list(6, 61)
    assert await count_tools(spy, changed, MODEL) == tools_tokens(changed)


async def _loop(
    client: httpx.AsyncClient, steps: int, context: dict[str, Any], tools: list[dict[str, Any]],
    tool: str = "tool_0",
) -> list[dict[str, Any]]:  # fmt: skip
    """An agent loop, whole history resent; each call's context_utilization."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "An agent."}]
    usages = []

    async def call() -> dict[str, Any]:
        body = {"model": MODEL, "messages": messages, "tools": tools, "context": context}
        response = await client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        data = response.json()
        usages.append(data["context_utilization"])
        answer = data["choices"][0]["message"]
        return {k: v for k, v in answer.items() if k in ("role", "content", "tool_calls")}

    for step in range(steps):
        messages.append({"role": "user", "content": f"Step {step}. CALL_TOOL:{tool}:{{}}"})
        answer = await call()
        messages.append(answer)
        for tool_call in answer.get("tool_calls") or []:
            content = f"line {step} " * 150
            messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": content})
        messages.append(await call())
    return usages


def _upstream_tokens(fake: FakeUpstream) -> list[int]:
    """What each upstream prompt holds, recounted: its messages plus its tool definitions."""
    sizes = []
    for record in fake.requests():
        body = record["body"]
        if record["path"].endswith("/chat/completions") and body.get("model") == MODEL:
            tools = tools_tokens(body["tools"]) if body.get("tools") else 0
            sizes.append(COUNTER.count_messages(body["messages"], MODEL) + tools)
    return sizes


@pytest.mark.parametrize("cache", [True, False], ids=["cache-aware fit", "previous fit"])
async def test_no_prompt_exceeds_the_budget_with_its_tools(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream, cache: bool
) -> None:
    tools = tool_list(8, 40)
    expected = tools_tokens(tools)
    assert 600 < expected < BUDGET // 2
    context = {"max_input_tokens": BUDGET, "cache": {"enabled": cache}}
    usages = await _loop(client, 10, context, tools)
    for usage in usages:
        assert usage["breakdown"]["tools"] == expected
        assert usage["tokens_used"] == sum(usage["breakdown"].values())
        assert usage["tokens_used"] <= BUDGET
    assert any(u["messages_excluded"] for u in usages), "the loop outgrew the budget"
    sizes = _upstream_tokens(fake_upstream)
    assert len(sizes) == len(usages)
    assert max(sizes) <= BUDGET, sizes
    # The history fit used the room the tools left: the largest prompt nearly fills it.
    assert max(sizes) > BUDGET // 2


async def test_passthrough_reports_the_tools_too(client: httpx.AsyncClient) -> None:
    tools = tool_list(3, 20)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Straight through."}],
        "tools": tools,
        "context": {"enabled": False},
    }
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    usage = response.json()["context_utilization"]
    assert usage["breakdown"]["tools"] == tools_tokens(tools)
    assert usage["tokens_used"] == sum(usage["breakdown"].values())


async def test_tools_alone_over_the_budget_are_a_context_length_error(
    client: httpx.AsyncClient,
) -> None:
    tools = tool_list(8, 40)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hello."}],
        "tools": tools,
        "context": {"max_input_tokens": tools_tokens(tools)},
    }
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert "the tools" in error["message"]


def test_a_request_adds_to_the_deployments_excluded_tools() -> None:
    settings = Settings(_env_file=None, cache_exclude_tools=["todo_write"])  # type: ignore[call-arg]
    for requested, expected in (
        (None, {"todo_write"}),
        ([], {"todo_write"}),
        (["grep"], {"todo_write", "grep"}),
    ):
        policy = cache_policy(settings, CacheOptions(exclude_tools=requested))
        assert policy.exclude_tools == expected


async def test_a_request_cannot_unprotect_the_deployments_tools(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(cache_exclude_tools=["tool_0"]))
    cache = {"keep_tool_results": 1, "clear_at_least_tokens": 100, "exclude_tools": ["other"]}
    context = {"max_input_tokens": BUDGET, "cache": cache}
    usages = await _loop(client, 10, context, tool_list(1, 5))
    assert any(u["cache_stats"]["cut"] for u in usages), "the loop had to cut, not clear"
    assert all(not u["cache_stats"]["cleared_now"] for u in usages)
    for record in fake_upstream.requests():
        messages = record["body"].get("messages") or []
        assert all("was cleared from this prompt" not in str(m.get("content")) for m in messages)


def test_the_agent_loop_bench_counts_the_tools_in_over_budget() -> None:
    prompt = [{"role": "user", "content": "word " * 90}]
    size = COUNTER.count_messages(prompt, "gpt-4o")
    run = Run("cache-aware fit", size + 10, [prompt, prompt], [0, 50])
    figures = run.figures()
    assert figures["over"] == 1  # the second prompt's tools take it over the budget
    assert figures["largest"] == size
