"""The coding-agent shape (issue 27, PROMPT.md "A session to test against").

One user turn; a ~24k-token system prompt and 12 tools (~28k tokens with them); then the model
reads 40 files one by one: each call appends an assistant message (signed thinking + a
``Read`` tool_use) and a user message (its tool_result, 3k-8k tokens), the whole history resent
on every call, as Claude Code sends it: ``/v1/messages``, thinking enabled, a cache mark on the
system prompt and one on the newest message. The fake upstream's answers are scripted (a
``Read`` of the next file, then a final text), so the session is the same direct and through
contextgate; only the prompts differ.
"""

from __future__ import annotations

import random
from typing import Any

import httpx

from bench.agent_measure import COUNT_MODEL, counter, strip_marks

__all__ = ["UPSTREAM_MODEL", "coding_session", "script"]

UPSTREAM_MODEL = "claude-sonnet-4-5-20250929"  # what litellm's anthropic provider sends
EPHEMERAL = {"type": "ephemeral"}
THINKING = {"type": "enabled", "budget_tokens": 2048}
WORDS = (
    "def class return import self value result config request response handler session "
    "token budget message history cache prefix index query async await raise error field "
    "model state append window region engine planner tool call assert test fixture"
).split()
TOOL_NAMES = (
    "Read", "Write", "Edit", "Bash", "Glob", "Grep", "LS", "TodoWrite",
    "WebFetch", "WebSearch", "NotebookEdit", "Task",
)  # fmt: skip


def text(rng: random.Random, tokens: int) -> str:
    """Code-like text of exactly ``tokens`` tiktoken tokens."""
    lines: list[str] = []
    while True:
        indent = "    " * rng.randint(0, 3)
        lines.append(indent + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))))
        if len(lines) % 40 == 0 and counter.count_text("\n".join(lines), COUNT_MODEL) >= tokens:
            break
    encoding = counter.encoding(COUNT_MODEL)
    return encoding.decode(encoding.encode("\n".join(lines))[:tokens])


def tools(rng: random.Random) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "description": f"{name}: " + text(rng, 300),
            "input_schema": {
                "type": "object",
                "properties": {"file_path": {"type": "string", "description": "Absolute path"}},
                "required": ["file_path"],
            },
        }
        for name in TOOL_NAMES
    ]


def script(files: int) -> list[str | dict[str, Any]]:
    """The fake's answers: a Read of each file in turn, then the final text."""
    reads: list[str | dict[str, Any]] = [
        {"tool_calls": [{"name": "Read", "arguments": {"file_path": f"/repo/src/module_{i}.py"}}]}
        for i in range(files)
    ]
    return [*reads, {"content": f"Read {files} files; done."}]


def _mark_newest(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Claude Code's marks: none on older messages, one on the newest message's last block."""
    sent = [strip_marks(m) for m in messages]
    last = sent[-1]
    content = last["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    sent[-1] = {**last, "content": [*content[:-1], {**content[-1], "cache_control": EPHEMERAL}]}
    return sent


def coding_session(
    client: httpx.Client,
    url: str,
    model: str,
    *,
    files: int,
    seed: int = 27,
    context: dict[str, Any] | None = None,
    system_tokens: int = 24_000,
) -> tuple[int, int]:
    """Run the session against ``url`` (contextgate's or the fake's /v1/messages). Returns
    (calls made, calls that failed). The fake must have ``script(files)`` queued."""
    rng = random.Random(seed)
    system = [
        {"type": "text", "text": "You are Claude Code, a coding agent."},
        {"type": "text", "text": text(rng, system_tokens), "cache_control": EPHEMERAL},
    ]
    body: dict[str, Any] = {
        "model": model, "max_tokens": 8192, "system": system, "tools": tools(rng),
        "thinking": THINKING,
    }  # fmt: skip
    if context is not None:
        body["context"] = context
    results = [text(rng, rng.randint(3000, 8000)) for _ in range(files)]
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": f"Read the {files} modules under src/."}],
        }
    ]
    calls = failed = 0
    while calls <= files + 1:
        calls += 1
        response = client.post(url, json={**body, "messages": _mark_newest(messages)})
        if response.status_code != 200:
            failed += 1
            break
        answer = response.json()
        messages.append({"role": "assistant", "content": answer["content"]})
        uses = [b for b in answer["content"] if b["type"] == "tool_use"]
        if not uses:
            break
        blocks = [
            {"type": "tool_result", "tool_use_id": use["id"], "content": results.pop(0)}
            for use in uses
        ]
        messages.append({"role": "user", "content": blocks})
    return calls, failed
