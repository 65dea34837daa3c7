"""An agent's resent history is not encoded again (issue 26).

A coding agent sends its whole history on every call. The second call of a tool loop brings one
new tool result: the tool results the first call brought are the same strings, and what
contextgate counts of them (tokens) it knows by content. Counted here by recording every text
tiktoken encodes during the second call (tiktoken is the library, not our code), and looking
for the bodies of the tool results that call resends. No timing.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import tiktoken

from app.core.settings import Settings
from app.main import create_app
from tests.fake_upstream import FakeUpstream
from tests.support.tool_loop import READ_FILE_TOOLS

RESULTS = 20
WORDS = "def class return import self value result config request response handler".split()
TOOLS = READ_FILE_TOOLS


def _file(rng: random.Random, step: int) -> str:
    lines = [" ".join(rng.choice(WORDS) for _ in range(10)) for _ in range(60)]
    # The fake upstream answers a tool result ending so with the next call (a loop).
    return "\n".join(lines) + f'\nCALL_TOOL:read_file:{{"path": "src/f{step + 1}.py"}}'


def _history(rng: random.Random) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " + _file(rng, -1)},
        {"role": "user", "content": "Fix the failing tests."},
    ]
    for step in range(RESULTS):
        call = {
            "id": f"call_seed_{step}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/f{step}.py"}}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": _file(rng, step)})
    return messages


async def _call(client: httpx.AsyncClient, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": "agent-model", "messages": messages, "tools": TOOLS}
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    assert message.get("tool_calls"), message  # the loop goes on
    return {"role": "assistant", "content": None, "tool_calls": message["tool_calls"]}


async def test_the_second_call_of_a_tool_loop_encodes_only_what_is_new(
    make_settings: Callable[..., Settings],
    database_url: str,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = make_settings(database_url=database_url, default_context_window=200_000)
    rng = random.Random(26)
    messages = _history(rng)
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://cg") as client:
            answer = await _call(client, messages)  # the first call brings the history
            messages.append(answer)
            call_id = answer["tool_calls"][0]["id"]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _file(rng, 99)})
            state = application.state.contextgate
            while state.background:  # the first call's after-answer work
                await next(iter(state.background))

            encoded: list[str] = []
            original = tiktoken.Encoding.encode

            def recording(self: tiktoken.Encoding, text: str, **kwargs: Any) -> list[int]:
                encoded.append(text)
                return original(self, text, **kwargs)

            monkeypatch.setattr(tiktoken.Encoding, "encode", recording)
            await _call(client, messages)  # the second call: one new tool result
            monkeypatch.undo()

    resent = [m["content"] for m in messages[:-1] if m["role"] == "tool"]
    assert len(resent) == RESULTS
    long_texts = [text for text in encoded if len(text) >= 512]
    again = [body for body in resent if any(text in body for text in long_texts)]
    # Every resent tool result was counted on the first call: none goes through the tokenizer
    # again, in full or in part. The new one does.
    assert again == [], f"{len(again)} of {len(resent)} resent tool results encoded again"
    assert any(text in messages[-1]["content"] for text in long_texts)
