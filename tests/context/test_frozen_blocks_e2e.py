"""How long a per-turn block (the user's facts, the date, recalled messages) stays in the prompt,
through a running server on the chat door (app/turns/frozen.py).

Within its tool loop a block is resent byte for byte. At the next user message, a short turn
(a chat's question and answer) is sent without its block from then on: one rewrite of that turn
instead of the block in every later prompt. A long turn (an agent's tool loop with a large
result) keeps it: dropping it would rewrite the whole turn. Stored token counts are the
messages' own, so the blocks never inflate the history that compaction measures.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "fake-model"
CONTEXT = {"max_input_tokens": 60_000, "date_prefix": True}
TOOLS: Any = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
FACTS = {
    "language": "python, with type hints everywhere and mypy in strict mode",
    "editor": "neovim with the lazy plugin manager and a dark colour scheme",
    "team": "the payments platform team in the Lisbon office, on call every fourth week",
}
BIG_RESULT = " ".join(f"line {i}: def handler(request): return response" for i in range(400))


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(
        tmp_path_factory,
        fake_upstream_server,
        {"CONTEXTGATE_COMPACTION_RATIO": "1.0"},
        name="frozen-blocks",
    )


@pytest.fixture
def sdk(server: ContextgateServer, fake_upstream: FakeUpstream) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=60)
    yield client
    client.close()


class Chat:
    """A client resending the whole history, as OpenAI clients do."""

    def __init__(self, sdk: openai.OpenAI, user: str) -> None:
        self.sdk, self.user = sdk, user
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
        self.usages: list[dict[str, Any]] = []
        self.conversation_id = ""

    def call(self) -> dict[str, Any]:
        response = self.sdk.chat.completions.create(
            model=MODEL,
            messages=self.messages,  # type: ignore[arg-type]
            tools=TOOLS,
            user=self.user,
            extra_body={"context": CONTEXT},
        )
        extra = response.model_extra or {}
        self.usages.append(extra["context_utilization"])
        self.conversation_id = extra["conversation_id"]
        answer = response.choices[0].message.model_dump(
            include={"role", "content", "tool_calls"}, exclude_none=True
        )
        self.messages.append(answer)
        return answer

    def ask(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})
        self.call()

    def agent_step(self, text: str, result: str) -> None:
        self.messages.append({"role": "user", "content": f"{text} CALL_TOOL:read_file:{{}}"})
        [call] = self.call()["tool_calls"]
        self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        self.call()


def _new_user(server: ContextgateServer) -> str:
    user = f"dev-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for key, value in FACTS.items():
            response = http.post("/v1/memories", json={"user": user, "key": key, "value": value})
            assert response.status_code == 200, response.text
    return user


def _prompts(fake: FakeUpstream) -> list[list[dict[str, Any]]]:
    return [
        r["body"]["messages"]
        for r in fake.requests()
        if r["path"].endswith("/chat/completions") and r["body"].get("model") == MODEL
    ]


def _users(prompt: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in prompt if m["role"] == "user"]


def _stored_user_tokens(server: ContextgateServer, conversation_id: str) -> list[int]:
    path = server.env["CONTEXTGATE_DATABASE_URL"].split("///", 1)[1]
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT token_count, context_prefix FROM messages WHERE conversation_id = ? "
            "AND role = 'user' ORDER BY sequence_number",
            (conversation_id,),
        ).fetchall()
    assert all(prefix for _, prefix in rows), "every user message has its block stored"
    return [int(tokens) for tokens, _ in rows]


def test_a_short_turn_keeps_its_block_until_the_next_rebase(
    server: ContextgateServer, sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    """The prompt owner keeps what was sent: a chat's questions keep the blocks they were sent
    with (a rebase, when the prompt reaches the high-water mark, drops the old ones)."""
    chat = Chat(sdk, _new_user(server))
    for question in ("What is a closure?", "And a generator?", "And a coroutine?"):
        chat.ask(question)
    prompts = _prompts(fake_upstream)
    for number, prompt in enumerate(prompts):
        users = _users(prompt)
        assert all(u.startswith("[CONTEXT: ") for u in users), number  # each as first sent
        assert "neovim" in users[-1]
        if number:
            assert prompt[: len(prompts[number - 1])] == prompts[number - 1], number
    assert [u["cache_stats"]["prefix_kept"] for u in chat.usages[1:]] == [True, True]
    for usage in chat.usages:
        assert usage["tokens_used"] == sum(usage["breakdown"].values())
    # Stored counts are the questions' own: a block is counted only where it is sent.
    assert max(_stored_user_tokens(server, chat.conversation_id)) < 20


def test_a_long_turn_keeps_its_block_and_the_prefix_holds(
    server: ContextgateServer, sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    chat = Chat(sdk, _new_user(server))
    chat.agent_step("Step 0: read the handlers.", BIG_RESULT)
    chat.agent_step("Step 1: and again.", BIG_RESULT)
    prompts = _prompts(fake_upstream)
    assert len(prompts) == 4
    for number in range(1, 4):
        assert prompts[number][: len(prompts[number - 1])] == prompts[number - 1], number
    assert all(u["cache_stats"]["prefix_kept"] for u in chat.usages[1:])
    first, second = _users(prompts[-1])
    assert first.startswith("[CONTEXT: ")  # step 0's block, as first sent
    assert second.startswith("[CONTEXT: ")
    # The frozen block is counted in the loop's later calls, as memory.
    loop_call = chat.usages[-1]
    assert loop_call["breakdown"]["memory"] > 0
    assert loop_call["tokens_used"] == sum(loop_call["breakdown"].values())
