"""The chat-form agent loop's history as the other doors' requests, and their answers back."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["anthropic_body", "from_anthropic", "from_responses", "responses_body"]


def anthropic_body(
    messages: list[dict[str, Any]], context: dict[str, Any], tools: list[dict[str, Any]], model: str
) -> dict[str, Any]:
    """The loop's chat-form history as a Claude-Code-style /v1/messages request."""
    turns: list[dict[str, Any]] = []
    for message in messages[1:]:
        if message["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
            block["content"] = message["content"]
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
        elif message["role"] == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            for call in message.get("tool_calls") or []:
                arguments = orjson.loads(call["function"]["arguments"] or "{}")
                blocks.append(
                    {"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                     "input": arguments}
                )  # fmt: skip
            turns.append({"role": "assistant", "content": blocks})
        else:
            turns.append({"role": "user", "content": message["content"]})
    definitions = [
        {"name": t["function"]["name"], "description": t["function"].get("description", ""),
         "input_schema": t["function"]["parameters"]}
        for t in tools
    ]  # fmt: skip
    return {
        "model": model,
        "max_tokens": 1024,
        "system": messages[0]["content"],
        "messages": turns,
        "tools": definitions,
        "context": context,
    }


def responses_body(
    messages: list[dict[str, Any]], context: dict[str, Any], tools: list[dict[str, Any]], model: str
) -> dict[str, Any]:
    """The loop's history as a /v1/responses request (stored: context managed), whole each time."""
    items: list[dict[str, Any]] = []
    for message in messages:
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
    definitions = [{"type": "function", **t["function"]} for t in tools]
    return {"model": model, "input": items, "tools": definitions, "context": context}


def from_responses(answer: dict[str, Any]) -> dict[str, Any]:
    text = "".join(
        part.get("text", "")
        for item in answer["output"] if item["type"] == "message"
        for part in item["content"]
    )  # fmt: skip
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [
        {"id": item["call_id"], "type": "function",
         "function": {"name": item["name"], "arguments": item["arguments"]}}
        for item in answer["output"] if item["type"] == "function_call"
    ]  # fmt: skip
    if calls:
        message["tool_calls"] = calls
    return message


def from_anthropic(answer: dict[str, Any]) -> dict[str, Any]:
    text = "".join(b["text"] for b in answer["content"] if b["type"] == "text")
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [
        {"id": b["id"], "type": "function",
         "function": {"name": b["name"], "arguments": orjson.dumps(b["input"]).decode()}}
        for b in answer["content"] if b["type"] == "tool_use"
    ]  # fmt: skip
    if calls:
        message["tool_calls"] = calls
    return message
