"""The prompt owner through the app, as a coding agent uses it: one user turn of many tool calls
on /v1/messages, extended thinking on, the whole history resent every call, under a small budget,
to the Anthropic-shaped fake upstream that counts 1.3x contextgate's tokens and refuses what
Anthropic refuses (a thinking block whose signature or text changed, a final tool-calling
answer without its thinking).

What the upstream received is checked call by call: every call carries thinking; between
rebases each prompt starts with the previous one, byte for byte (cache marks aside); rebases
are rare and deep; no prompt passes the budget by the upstream's own count; the learned ratio
is reported.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.fake_upstream.anthropic import prompt_tokens
from tests.support.models import ANTHROPIC_LITELLM_MODEL, fake_model_list

MODEL = "claude-agent"
UPSTREAM_MODEL = ANTHROPIC_LITELLM_MODEL.split("/", 1)[1]
SCALE = 1.3
BUDGET = 24_000  # in the provider's tokens
CALLS = 24
SYSTEM = "You are a coding agent. Read files with the tools before answering. " * 60
READ_TOOL = {
    "name": "Read",
    "description": "Read a file of the repository.",
    "input_schema": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
}
WORDS = "def class return import self value module token cache prompt budget".split()


@pytest.fixture(scope="module")
def scaled_upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(token_scale=SCALE) as fake:
        yield fake


@pytest.fixture
async def agent_client(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    scaled_upstream: FakeUpstream,
    tmp_path: Path,
) -> httpx.AsyncClient:
    scaled_upstream.reset()
    config = fake_model_list(tmp_path, scaled_upstream, anthropic=(MODEL,))
    settings = make_settings(upstream_base_url=scaled_upstream.base_url, config=config)
    return await client_for(settings)


def _unmarked(value: Any) -> Any:
    """Cache marks aside: a mark turns a string content into one marked text block."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        if (
            len(value) == 1
            and isinstance(value[0], dict)
            and set(value[0]) - {"cache_control"} == {"type", "text"}
        ):
            return value[0]["text"]
        return [_unmarked(v) for v in value]
    return value


def _provider_tokens(body: dict[str, Any]) -> int:
    """The fake's own count of a prompt (tests/fake_upstream/anthropic.py usage)."""
    return prompt_tokens(body, SCALE)


def _file(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(700, 1100)))


async def test_a_long_thinking_loop_keeps_its_prefix_and_its_thinking(
    agent_client: httpx.AsyncClient, scaled_upstream: FakeUpstream
) -> None:
    rng = random.Random(27)
    scaled_upstream.script(
        UPSTREAM_MODEL,
        [
            {"tool_calls": [{"name": "Read", "arguments": {"path": f"src/m{i}.py"}}]}
            for i in range(CALLS - 1)
        ]
        + ["All files read."],
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every module."}]
    usages: list[dict[str, Any]] = []
    for _ in range(CALLS):
        response = await agent_client.post(
            "/v1/messages",
            json={
                "model": MODEL,
                "max_tokens": 2048,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "system": SYSTEM,
                "tools": [READ_TOOL],
                "messages": messages,
                "context": {"max_input_tokens": BUDGET},
            },
        )
        assert response.status_code == 200, response.text  # the fake refused nothing
        answer = response.json()
        usages.append(answer["context_utilization"])
        messages.append({"role": "assistant", "content": answer["content"]})
        uses = [block for block in answer["content"] if block["type"] == "tool_use"]
        if not uses:
            break
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": uses[0]["id"], "content": _file(rng)}
                ],
            }
        )
    bodies = [r["body"] for r in scaled_upstream.requests() if r["path"].endswith("/v1/messages")]
    assert len(bodies) == len(usages) == CALLS
    assert all(body["thinking"]["type"] == "enabled" for body in bodies)
    assert not any(u.get("thinking_disabled") for u in usages)
    rebased = [i for i, u in enumerate(usages) if u["cache_stats"]["rebased"]]
    assert rebased[0] == 0, "the first prompt starts the ledger"
    assert len(rebased) >= 2, "the loop outgrows the budget"
    assert len(rebased) <= CALLS // 4, [usages[i]["cache_stats"]["rebase_reason"] for i in rebased]
    for index in range(1, CALLS):
        body, previous = bodies[index], bodies[index - 1]
        assert _provider_tokens(body) <= BUDGET, f"call {index} over the provider's budget"
        if index in rebased:
            assert "high-water" in usages[index]["cache_stats"]["rebase_reason"]
            assert usages[index]["cache_stats"]["cleared_now"], "a deep cut clears old results"
            continue
        kept = _unmarked(body["messages"][: len(previous["messages"])])
        assert kept == _unmarked(previous["messages"]), f"call {index} rewrote its prefix"
        assert usages[index]["cache_stats"]["prefix_kept"] is True
    ratio = usages[-1]["calibration"]["ratio"]
    assert ratio > 1.1, "the upstream's higher count was learned"
    assert usages[-1]["calibration"]["provider_max_input_tokens"] == BUDGET
    assert usages[-1]["max_input_tokens"] < BUDGET
    # every tool result in the prompt is in the ledger, those of earlier calls included
    sources = {a["artifact_id"]: a for a in usages[-2]["artifacts_processed"]}
    tool_ids = {
        block["tool_use_id"]
        for message in messages[:-2]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }
    assert tool_ids - set(sources) == set() or len(sources) >= len(tool_ids) - 1
