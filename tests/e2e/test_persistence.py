"""Restart persistence: a conversation outlives the server process that stored it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "gpt-4o-mini"


def _sdk(server: ContextgateServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=30)


def test_conversation_survives_a_restart(tmp_path: Path, fake_upstream: FakeUpstream) -> None:
    env = {
        "CONTEXTGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'persist.db'}",
        "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream.base_url,
        "CONTEXTGATE_MAX_RETRIES": "0",
    }
    messages: list[Any] = [
        {"role": "system", "content": "remember me"},
        {"role": "user", "content": "before the restart"},
    ]
    with ContextgateServer(env, log_path=tmp_path / "first.log") as first:
        with _sdk(first) as sdk:
            answer = sdk.chat.completions.create(model=MODEL, messages=messages)
            by_id = sdk.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "second, by id"}],
                extra_body={"conversation_id": (answer.model_extra or {})["conversation_id"]},
            )
    conversation_id = (answer.model_extra or {})["conversation_id"]
    assert (by_id.model_extra or {})["conversation_id"] == conversation_id

    # A new process on the same database file.
    with ContextgateServer(env, log_path=tmp_path / "second.log") as second:
        with _sdk(second) as sdk:
            # Full history (as OpenAI clients send it), no id: found by its messages.
            messages += [
                answer.choices[0].message.model_dump(),
                {"role": "user", "content": "second, by id"},
                by_id.choices[0].message.model_dump(),
                {"role": "user", "content": "after the restart"},
            ]
            third = sdk.chat.completions.create(model=MODEL, messages=messages)
            assert (third.model_extra or {})["conversation_id"] == conversation_id
            # And by id, new messages only.
            fourth = sdk.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "and once more"}],
                extra_body={"conversation_id": conversation_id},
            )
            assert (fourth.model_extra or {})["conversation_id"] == conversation_id
        sent = [m["content"] for m in fake_upstream.requests()[-1]["body"]["messages"]]
        assert sent[0] == "remember me"
        assert sent[1] == "before the restart"
        with httpx.Client(base_url=second.url) as http:
            stored = http.get(f"/v1/conversations/{conversation_id}").json()
            total = http.get("/v1/conversations").json()["total"]
    assert total == 1
    assert [m["content"] for m in stored["messages"]] == [
        "remember me",
        "before the restart",
        "Echo: before the restart",
        "second, by id",
        "Echo: second, by id",
        "after the restart",
        "Echo: after the restart",
        "and once more",
        "Echo: and once more",
    ]
    assert [m["sequence_number"] for m in stored["messages"]] == list(range(9))
    assert stored["message_count"] == 9
