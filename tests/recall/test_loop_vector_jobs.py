"""An agent's tool loop brings no text to embed: once a conversation's vector job has left
nothing to embed, a textless step starts no job (each read the conversation back to find
nothing, on every call of the loop); a step with text, or one after which more tool results
are cleared, does (app/recall/backlog.py, issue 26)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

import app.recall.backlog as backlog_module
from app.db.models import MessageVector
from app.recall.backlog import schedule_message_vectors
from app.turns.memory_services import recall_services
from tests.memories.helpers import app_state, drain
from tests.support.tool_loop import READ_FILE_TOOLS

TOOLS = READ_FILE_TOOLS


@pytest.fixture
def job_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """One entry per time a vector job read the conversation's missing messages."""
    reads: list[str] = []
    original = backlog_module.missing_messages

    async def counting(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[2])
        return await original(*args, **kwargs)

    monkeypatch.setattr(backlog_module, "missing_messages", counting)
    return reads


async def _call(client: httpx.AsyncClient, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": "fake-model", "messages": messages, "tools": TOOLS, "user": "lee"}
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_a_textless_loop_step_starts_no_vector_job(
    client: httpx.AsyncClient, job_reads: list[str]
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": 'Read the notes. CALL_TOOL:read_file:{"path": "a.txt"}'}
    ]
    first = await _call(client, messages)
    conversation_id = first["conversation_id"]
    await drain(client)
    assert job_reads == [conversation_id]  # the user's text: embedded
    result = first
    for step in range(3):  # tool results asking for more calls: no text anywhere
        call = result["choices"][0]["message"]["tool_calls"][0]
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": f'contents {step}\nCALL_TOOL:read_file:{{"path": "{step}.txt"}}',
            },
        ]
        result = await _call(client, messages)
        assert result["conversation_id"] == conversation_id
        assert result["choices"][0]["message"]["tool_calls"]  # textless again
        await drain(client)
    assert job_reads == [conversation_id]  # the loop's textless steps started no job

    # The agent answers in text at last: that text is embedded.
    call = result["choices"][0]["message"]["tool_calls"][0]
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "the last file"},
    ]
    final = await _call(client, messages)
    assert final["choices"][0]["message"]["content"]
    await drain(client)
    assert job_reads == [conversation_id, conversation_id]
    async with app_state(client).database.reading() as session:
        vectors = await session.scalar(
            select(func.count())
            .select_from(MessageVector)
            .where(
                MessageVector.conversation_id == conversation_id,
                MessageVector.embedding.is_not(None),
            )
        )
    assert vectors == 2  # the user's request and the final answer


async def test_a_step_after_more_results_are_cleared_starts_a_job(
    client: httpx.AsyncClient,
) -> None:
    state = app_state(client)
    services = recall_services(state)
    backlog = services.backlog
    key = ("t", "conv_x")
    backlog.settle(key, 7)
    schedule_message_vectors(services, state.settings, key, None, textless_at=7)
    assert not backlog.running(*key)  # settled at 7, nothing new: no job
    schedule_message_vectors(services, state.settings, key, None, textless_at=9)
    assert backlog.running(*key)  # results cleared up to 9 since: they are embedded
    assert backlog.settled(key) is None  # until that job ends
    await drain(client)
    assert backlog.settled(key) == 0  # the job read the (absent) conversation's 0
