"""An agent-sized prompt (issue 26): a coding agent's tool loop, resent whole on every call.

A ~2,000-token system prompt, three tools, one user task, then ``results`` tool steps (an
assistant ``read_file`` call and its ~2,900-token result): 50 steps make ~150k tokens. Each
call of the loop sends the whole history; the model's answer (a tool call, echoed back as the
agent would) and one more tool result are appended before the next call, as Claude Code, Codex
and the Agents SDK do. The fake upstream answers a tool result that ends with
``CALL_TOOL:read_file:{...}`` with that call (tests/fake_upstream). The same history is
written in the three doors' shapes: ``/v1/chat/completions``, ``/v1/messages``
(Anthropic's) and ``/v1/responses``.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

MODEL = "bench-model"
RESULT_CHARS = 11_600  # ~2,900 tokens of code-like text (tiktoken o200k/cl100k)
WORDS = (
    "def class return import self value result config request response handler session "
    "token budget message history cache prefix index query async await raise error field "
    "model state append window region engine planner tool call assert test fixture"
).split()
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
    for name, description in [
        ("read_file", "Read a file of the repository"),
        ("grep", "Search the repository"),
        ("run_tests", "Run the test suite"),
    ]
]

Message = dict[str, Any]


def code_text(rng: random.Random, chars: int) -> str:
    """Code-like lines of words, about ``chars`` characters."""
    lines: list[str] = []
    size = 0
    while size < chars:
        line = "    " * rng.randint(0, 3) + " ".join(
            rng.choice(WORDS) for _ in range(rng.randint(4, 12))
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


class AgentTask:
    """One agent task: its chat-form history, grown by one tool step per call."""

    def __init__(self, run: str, results: int = 50, seed: int = 26) -> None:
        self.rng = random.Random(seed)
        self.step = 0
        system = f"You are a coding agent (run {run}). Follow the repository's conventions.\n"
        self.messages: list[Message] = [
            {"role": "system", "content": system + code_text(self.rng, 8_000)},
            {"role": "user", "content": "Fix the failing tests of the repository."},
        ]
        for index in range(results):
            call = {
                "id": f"call_seed_{run}_{index}",
                "type": "function",
                "function": {"name": "read_file", "arguments": self._arguments()},
            }
            self.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            self.add_result(call["id"])

    def _arguments(self) -> str:
        self.step += 1
        return orjson.dumps({"path": f"src/module_{self.step}.py"}).decode()

    def add_result(self, call_id: str) -> None:
        """A file's text, then the fake upstream's cue for the next call."""
        content = f"{code_text(self.rng, RESULT_CHARS)}\nCALL_TOOL:read_file:{self._arguments()}"
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def answered(self, answer: Message) -> None:
        """The model's answer (chat form) goes back as it came, then its tool's result."""
        self.messages.append(answer)
        for call in answer.get("tool_calls") or []:
            self.add_result(call["id"])

    def body(self, door: str) -> dict[str, Any]:
        if door == "messages":
            return anthropic_body(self.messages)
        if door == "responses":
            return responses_body(self.messages)
        return {"model": MODEL, "messages": self.messages, "tools": TOOLS, "max_tokens": 256}


def anthropic_body(messages: list[Message]) -> dict[str, Any]:
    """The chat-form history as a Claude-Code-style /v1/messages request."""
    turns: list[dict[str, Any]] = []
    for message in messages[1:]:
        if message["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": message["content"],
            }
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
        elif message["role"] == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls") or []:
                blocks.append(
                    {"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                     "input": orjson.loads(call["function"]["arguments"] or "{}")}
                )  # fmt: skip
            turns.append({"role": "assistant", "content": blocks})
        else:
            turns.append({"role": "user", "content": message["content"]})
    tools = [
        {"name": t["function"]["name"], "description": t["function"]["description"],
         "input_schema": t["function"]["parameters"]}
        for t in TOOLS
    ]  # fmt: skip
    return {
        "model": MODEL,
        "max_tokens": 256,
        "system": messages[0]["content"],
        "messages": turns,
        "tools": tools,
    }


def responses_body(messages: list[Message]) -> dict[str, Any]:
    """The history as a /v1/responses request, whole each time and with ``store: false``, as
    Codex sends it (no response object kept: the conversation is still stored and managed)."""
    items: list[dict[str, Any]] = []
    for message in messages[1:]:
        if message["role"] == "tool":
            items.append(
                {"type": "function_call_output", "call_id": message["tool_call_id"],
                 "output": message["content"]}
            )  # fmt: skip
        elif message["role"] == "assistant":
            if message.get("content"):
                items.append({"role": "assistant", "content": message["content"]})
            for call in message.get("tool_calls") or []:
                items.append(
                    {"type": "function_call", "call_id": call["id"],
                     "name": call["function"]["name"], "arguments": call["function"]["arguments"]}
                )  # fmt: skip
        else:
            items.append({"role": message["role"], "content": message["content"]})
    tools = [{"type": "function", **t["function"]} for t in TOOLS]
    return {
        "model": MODEL,
        "instructions": messages[0]["content"],
        "input": items,
        "tools": tools,
        "max_output_tokens": 256,
        "store": False,
    }


def answer_of(door: str, payload: dict[str, Any]) -> Message:
    """The assistant message (chat form) of a door's answer."""
    if door == "messages":
        text = "".join(b["text"] for b in payload["content"] if b["type"] == "text")
        calls = [
            {"id": b["id"], "type": "function",
             "function": {"name": b["name"], "arguments": orjson.dumps(b["input"]).decode()}}
            for b in payload["content"] if b["type"] == "tool_use"
        ]  # fmt: skip
    elif door == "responses":
        text = "".join(
            part.get("text", "")
            for item in payload["output"] if item["type"] == "message"
            for part in item["content"]
        )  # fmt: skip
        calls = [
            {"id": item["call_id"], "type": "function",
             "function": {"name": item["name"], "arguments": item["arguments"]}}
            for item in payload["output"] if item["type"] == "function_call"
        ]  # fmt: skip
    else:
        message = payload["choices"][0]["message"]
        text = message.get("content") or ""
        calls = message.get("tool_calls") or []
    answer: Message = {"role": "assistant", "content": text or None}
    if calls:
        answer["tool_calls"] = calls
    return answer
