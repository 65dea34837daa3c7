"""A tool-loop step costs what is new, not what is resent (issue 26, point 1).

Agents resend their whole history on every call. On a kept prompt the step appends the previous
answer and the new tool result: the texts that go through the tokenizer on a call must not grow
with the history, and the stored history is not read again (the kept prompt is the ledger).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import app.tokens.counter as tokens_module
from tests.fake_upstream import FakeUpstream

MODEL = "fake-model"
TOOL = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}
STEPS = 12


def _result(step: int) -> str:
    return f"file {step}: " + " ".join(f"line{step}_{n} value" for n in range(300))


async def test_encoded_texts_per_call_do_not_grow_with_the_history(
    client: httpx.AsyncClient, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[int] = []
    original = tokens_module._encode_len

    def counting(encoding: Any, text: str) -> int:
        if len(text) > 1000:  # a message body, not a role or a short name
            encoded.append(len(text))
        return original(encoding, text)

    monkeypatch.setattr(tokens_module, "_encode_len", counting)
    fake_upstream.script(
        MODEL,
        [{"tool_calls": [{"name": "read", "arguments": f'{{"n": {i}}}'}]} for i in range(STEPS)],
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read all the files."}]
    per_call: list[int] = []
    kept: list[bool] = []
    for step in range(STEPS):
        encoded.clear()
        response = await client.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": messages, "tools": [TOOL],
                  "context": {"max_input_tokens": 100_000}},
        )  # fmt: skip
        assert response.status_code == 200, response.text
        body = response.json()
        per_call.append(len(encoded))
        kept.append(body["context_utilization"]["cache_stats"]["prefix_kept"])
        answer = body["choices"][0]["message"]
        messages.append({k: v for k, v in answer.items() if v is not None and k != "refusal"})
        call = answer["tool_calls"][0]
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": _result(step)})
    assert all(kept[1:]), kept
    # Each step encodes its new result a few times (counted, planned, rendered): the same
    # handful on the 12th call as on the 3rd, whatever the history resent.
    assert max(per_call[2:]) <= 8, per_call
    assert per_call[-1] == per_call[2], per_call
