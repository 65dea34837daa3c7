"""litellm gets its own copy of a prompt's messages: its provider translations may change a
message in place, and the prompt's messages are shared with the ledger's memory of decoded
parts (app/turns/ledger_parts.py)."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

from app.llm import client as client_module
from app.llm.client import LLMClient, RetryPolicy
from app.llm.routing import ModelRouter

ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


async def test_a_translation_that_changes_messages_in_place_changes_only_its_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def acompletion(*, messages: list[dict[str, Any]], **_kwargs: Any) -> dict[str, Any]:
        for message in messages:  # as a provider translation might
            content = message["content"]
            if isinstance(content, list):
                content[-1].pop("cache_control", None)
            message["role"] = "changed"
        return ANSWER

    monkeypatch.setattr(client_module, "_litellm", lambda: SimpleNamespace(acompletion=acompletion))
    marked = {"type": "text", "text": "a long tool result", "cache_control": {"type": "ephemeral"}}
    messages = [{"role": "user", "content": "hi"}, {"role": "tool", "content": [marked]}]
    before = copy.deepcopy(messages)
    client = LLMClient(ModelRouter(), retry=RetryPolicy(max_retries=0), direct=False)
    completion = await client.complete("gpt-4o-mini", messages)
    assert completion.response["choices"][0]["message"]["content"] == "ok"
    assert messages == before
