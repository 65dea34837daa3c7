"""Seed a conversation through the app itself (chat requests to the fake upstream) for the
operator tests: CLI, inspector page. It has a tool step, a plain turn and an attachment."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["Seeded", "seed_conversation"]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@dataclass(slots=True)
class Seeded:
    conversation_id: str
    responses: list[dict[str, Any]]
    request_ids: list[str]  # X-Request-Id of each chat request: the request log's id

    @property
    def request_count(self) -> int:
        return len(self.responses)

    @property
    def artifacts(self) -> list[dict[str, Any]]:
        return [
            artifact
            for response in self.responses
            for artifact in response["context_utilization"].get("artifacts_processed", [])
        ]


async def _post(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    result["_request_id"] = response.headers["x-request-id"]
    return result


async def seed_conversation(client: httpx.AsyncClient, *, user: str = "alice") -> Seeded:
    model = "gpt-4o-mini"
    args = json.dumps({"city": "Paris"})
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": f"What is the weather in Paris?\nCALL_TOOL:get_weather:{args}"},
    ]
    first = await _post(client, {"model": model, "messages": history, "tools": TOOLS, "user": user})
    conversation_id = first["conversation_id"]
    call = first["choices"][0]["message"]
    assert call.get("tool_calls"), call
    history.append(call)
    history.append(
        {
            "role": "tool",
            "tool_call_id": call["tool_calls"][0]["id"],
            "content": json.dumps({"city": "Paris", "forecast": "sunny", "celsius": 21}),
        }
    )
    second = await _post(
        client, {"model": model, "messages": history, "tools": TOOLS, "user": user}
    )
    history.append(second["choices"][0]["message"])
    history.append({"role": "user", "content": "Summarise the attached travel notes."})
    third = await _post(
        client,
        {
            "model": model,
            "messages": history,
            "user": user,
            "attachments": [
                {
                    "content": "Travel notes. " + "Paris museums open at nine. " * 40,
                    "title": "notes.md",
                    "source": "notes.md",
                }
            ],
        },
    )
    for response in (second, third):
        assert response["conversation_id"] == conversation_id
    responses = [first, second, third]
    return Seeded(conversation_id, responses, [r.pop("_request_id") for r in responses])


SUMMARY = json.dumps(
    {
        "episodic": "The user counted turns and the assistant echoed each one.",
        "facts": [{"fact": "The user is counting turns", "type": "fact", "importance": 6}],
    }
)


async def seed_compacted(client: httpx.AsyncClient, fake_upstream: Any, turns: int = 12) -> str:
    """A conversation long enough, under a small budget, to be compacted into summaries.

    ``client`` must use ``summarizer_model="fake-summarizer"``.
    """
    fake_upstream.script("fake-summarizer", [SUMMARY] * (turns * 2))
    conversation_id: str | None = None
    for turn in range(turns):
        messages: list[dict[str, Any]] = []
        if conversation_id is None:
            messages.append({"role": "system", "content": "You are terse."})
        words = " ".join(f"w{i}" for i in range(20))
        messages.append({"role": "user", "content": f"turn {turn} {words}"})
        body: dict[str, Any] = {
            "model": "fake-model",
            "messages": messages,
            # Compaction at the prompt owner's rebases, reported by the request that rebased
            # (none in the background: that would be at 1.0 x the high-water mark).
            "context": {"max_input_tokens": 600, "compaction_ratio": 1.0},
        }
        if conversation_id:
            body["conversation_id"] = conversation_id
        result = await _post(client, body)
        result.pop("_request_id")
        conversation_id = result["conversation_id"]
    assert conversation_id is not None
    return conversation_id
