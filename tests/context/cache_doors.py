"""Agent loops on the Anthropic and Responses doors, and what the upstream's prompts show.

Each loop is a coding agent's: a user asks, the model calls a tool (the fake upstream's
``CALL_TOOL`` directive), the result goes back, the model answers; as the SDKs send it. The
prompts are read back from the fake upstream (chat form: every door reaches it as a chat call).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import orjson

from app.tokens.counter import TokenCounter
from tests.fake_upstream import FakeUpstream

MODEL = "fake-model"  # not a helper model: the upstream's prompts for it are the loop's only
BUDGET = 3000
SYSTEM = "You are a coding agent. Follow the repository's conventions."
WORDS = "def class return import self value result config request token cache prefix".split()
COUNTER = TokenCounter()
_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The file's path, from the repository root"},
        "pattern": {"type": "string", "description": "A regular expression to look for"},
    },
}
# name -> description: a few hundred tokens in all, sent on every call.
TOOLS = {
    "read_file": "Read a file of the repository and return its lines, numbered. " * 6,
    "grep": "Search the repository for a pattern and return the matching lines. " * 6,
    "run_tests": "Run the test suite, or one test file, and return the report. " * 6,
}


def anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": n, "description": d, "input_schema": _SCHEMA} for n, d in TOOLS.items()]


def responses_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "name": n, "description": d, "parameters": _SCHEMA}
        for n, d in TOOLS.items()
    ]


def result_text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(250, 450)))


def ask(step: int, tool: str = "read_file") -> str:
    return f"Step {step}: look at module {step}. CALL_TOOL:{tool}:{{}}"


@dataclass
class Loop:
    """One loop's calls: each call's context_utilization, as the door answered."""

    usages: list[dict[str, Any]] = field(default_factory=list)
    # Between calls (after call n), what a test wants done: e.g. add a memory.
    between: dict[int, Callable[[], None]] = field(default_factory=dict)

    def after_call(self) -> None:
        action = self.between.get(len(self.usages))
        if action is not None:
            action()


def messages_loop(
    sdk: anthropic.Anthropic, steps: int, context: dict[str, Any], loop: Loop,
    user: str | None = None,
) -> None:  # fmt: skip
    """Claude Code's shape: the whole conversation resent, tool results in user turns."""
    rng = random.Random(14)
    turns: list[dict[str, Any]] = []
    extra: dict[str, Any] = {"context": context}
    if user is not None:
        extra["metadata"] = {"user_id": user}

    def call() -> list[dict[str, Any]]:
        reply = sdk.messages.create(
            model=MODEL, max_tokens=512, system=SYSTEM, messages=turns,  # type: ignore[arg-type]
            tools=anthropic_tools(), extra_body=extra,  # type: ignore[arg-type]
        )  # fmt: skip
        loop.usages.append((reply.model_extra or {})["context_utilization"])
        loop.after_call()
        blocks = [block.model_dump(exclude_none=True) for block in reply.content]
        turns.append({"role": "assistant", "content": blocks})
        return [b for b in blocks if b["type"] == "tool_use"]

    for step in range(steps):
        turns.append({"role": "user", "content": ask(step)})
        calls = call()
        results = [
            {"type": "tool_result", "tool_use_id": c["id"], "content": result_text(rng)}
            for c in calls
        ]
        turns.append({"role": "user", "content": results})
        call()


def _output(response: Any) -> list[dict[str, Any]]:
    """The answer's items as a client sends them back as input."""
    items: list[dict[str, Any]] = []
    for item in response.output:
        if item.type == "function_call":
            items.append(
                {"type": "function_call", "call_id": item.call_id, "name": item.name,
                 "arguments": item.arguments}
            )  # fmt: skip
        elif item.type == "message":
            text = "".join(part.text for part in item.content if part.type == "output_text")
            items.append({"role": "assistant", "content": text})
    return items


def responses_loop(
    sdk: openai.OpenAI, steps: int, context: dict[str, Any], loop: Loop, *,
    chained: bool, user: str | None = None,
) -> None:  # fmt: skip
    """``chained``: only the new items with ``instructions`` + ``previous_response_id`` (the
    Agents SDK's way); else the whole input resent, the system prompt its first item."""
    rng = random.Random(15)
    items: list[dict[str, Any]] = [] if chained else [{"role": "system", "content": SYSTEM}]
    previous: str | None = None
    sent = 0

    def call() -> list[dict[str, Any]]:
        nonlocal previous, sent
        params: dict[str, Any] = {"model": MODEL, "tools": responses_tools()}
        if chained:
            params["instructions"] = SYSTEM
            if previous is not None:
                params["previous_response_id"] = previous
        if user is not None:
            params["user"] = user
        response = sdk.responses.create(
            input=items[sent:] if chained else items,  # type: ignore[arg-type]
            extra_body={"context": context}, **params,
        )  # fmt: skip
        loop.usages.append((response.model_extra or {})["context_utilization"])
        loop.after_call()
        previous = response.id
        output = _output(response)
        items.extend(output)
        sent = len(items)
        return [i for i in output if i.get("type") == "function_call"]

    for step in range(steps):
        items.append({"role": "user", "content": ask(step)})
        for function_call in call():
            items.append(
                {"type": "function_call_output", "call_id": function_call["call_id"],
                 "output": result_text(rng)}
            )  # fmt: skip
        call()


@dataclass
class Prompt:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]

    @property
    def tokens(self) -> int:
        """What the upstream got, recounted: the messages and the tool definitions."""
        tools = COUNTER.count_text(orjson.dumps(self.tools).decode(), MODEL) if self.tools else 0
        return COUNTER.count_messages(self.messages, MODEL) + tools


def prompts(fake: FakeUpstream) -> list[Prompt]:
    return [
        Prompt(r["body"]["messages"], r["body"].get("tools") or [])
        for r in fake.requests()
        if r["path"].endswith("/chat/completions") and r["body"].get("model") == MODEL
    ]


def pairs_intact(prompt: list[dict[str, Any]]) -> bool:
    """Every tool call's result follows it, and every result has its call."""
    open_calls: set[str] = set()
    for message in prompt:
        if message["role"] == "tool":
            if message.get("tool_call_id") not in open_calls:
                return False
            open_calls.discard(message["tool_call_id"])
            continue
        if open_calls:
            return False
        open_calls = {str(c["id"]) for c in message.get("tool_calls") or []}
    return not open_calls


def placeholders(prompt: list[dict[str, Any]]) -> dict[str, str]:
    """Cleared tool results in a prompt: call id -> the placeholder sent."""
    return {
        str(m["tool_call_id"]): str(m["content"])
        for m in prompt
        if m["role"] == "tool" and "was cleared from this prompt" in str(m["content"])
    }


def rebases(usages: list[dict[str, Any]]) -> list[int]:
    return [i for i, u in enumerate(usages) if i and not u["cache_stats"]["prefix_kept"]]


def check_cache_aware_loop(sent: list[Prompt], usages: list[dict[str, Any]]) -> int:
    """What issue 14 asks of consecutive prompts; returns the first rebase's index."""
    assert len(sent) == len(usages)
    rebased = rebases(usages)
    assert rebased, "the loop outgrows the budget"
    assert len(rebased) <= len(usages) // 4, rebased
    tools = {u["breakdown"]["tools"] for u in usages}
    assert len(tools) == 1, "the tools are counted the same on every call"
    assert tools.pop() > 200, "the tools are counted"
    for i, prompt in enumerate(sent):
        usage = usages[i]
        assert usage["tokens_used"] == sum(usage["breakdown"].values())
        assert usage["tokens_used"] <= BUDGET
        assert prompt.tokens <= BUDGET, f"call {i}: {prompt.tokens} tokens with its tools"
        assert pairs_intact(prompt.messages), f"call {i} split a tool call from its result"
        if i and i not in rebased:
            previous = sent[i - 1].messages
            assert prompt.messages[: len(previous)] == previous, f"call {i} rewrote the prefix"
            assert prompt.tools == sent[i - 1].tools
    assert any(usages[i]["cache_stats"]["cut"] for i in rebased), "a cut, not only clearing"
    first = rebased[0]
    stats = usages[first]["cache_stats"]
    # Deep: well below the budget afterwards, so the following calls keep the new prefix.
    assert usages[first]["tokens_used"] < 0.75 * usages[first - 1]["tokens_used"]
    assert stats["cleared_now"], "the rebase cleared old tool results in a batch"
    cleared = placeholders(sent[first].messages)
    assert set(cleared) == {c["tool_call_id"] for c in stats["cleared_now"]}
    for item in stats["cleared_now"]:
        text = cleared[item["tool_call_id"]]
        assert item["tool_name"] in text
        assert f"{item['tokens']} tokens" in text
    # A placeholder stays a placeholder, with the same bytes, in every later prompt.
    for later in sent[first + 1 :]:
        results = {m["tool_call_id"]: m["content"] for m in later.messages if m["role"] == "tool"}
        for call_id, text in cleared.items():
            if call_id in results:
                assert results[call_id] == text
    return first
