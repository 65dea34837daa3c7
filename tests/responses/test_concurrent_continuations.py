"""Two requests continuing the same latest response at the same time are two branches: both
succeed, each stored on its own line, neither seeing the other's turn (then or later). On
SQLite and PostgreSQL, with the upstream slow enough that both are in flight together, sent to
one server (the second branches when it starts: it claims nothing) or to two replicas of it on
the same database (the second branches when its turn is stored: the guarded write decides)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.conversations.service import conversation_service
from app.conversations.stamp import Stamp
from app.core.database import create_database
from app.core.settings import Settings
from app.keys.caller import DEFAULT_TENANT
from app.responses.service import response_service
from tests.fake_upstream import FakeUpstream
from tests.support.conversations import message
from tests.support.e2e import sse_events

MODEL = "gpt-4o-mini"
DELAY_MS = 400


async def respond(
    client: httpx.AsyncClient, text: str, previous: str | None = None, **extra: Any
) -> httpx.Response:
    body: dict[str, Any] = {"model": MODEL, "input": text, **extra}
    if previous is not None:
        body["previous_response_id"] = previous
    response = await client.post("/v1/responses", json=body)
    assert response.status_code == 200, response.text
    return response


def final(response: httpx.Response) -> dict[str, Any]:
    """The Response object, answered whole or as the last event of a stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        events = sse_events(response)
        assert events[-1]["type"] == "response.completed", events[-1]
        body: dict[str, Any] = events[-1]["response"]
        return body
    result: dict[str, Any] = response.json()
    return result


async def contents(client: httpx.AsyncClient, conversation_id: str) -> list[str]:
    response = await client.get(f"/v1/conversations/{conversation_id}")
    return [m["content"] for m in response.json()["messages"]]


async def prompts(fake: FakeUpstream) -> list[list[str]]:
    return [
        [m["content"] for m in r["body"]["messages"]]
        for r in await fake.arequests()
        if r["path"].endswith("/chat/completions")
    ]


@pytest.mark.parametrize("replicas", [1, 2], ids=["one-server", "two-replicas"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_two_concurrent_continuations_are_two_branches(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    database_url: str,
    fake_upstream: FakeUpstream,
    stream: bool,
    replicas: int,
) -> None:
    settings = make_settings(database_url=database_url)
    servers: list[httpx.AsyncClient] = [await client_for(settings) for _ in range(replicas)]
    client = servers[0]
    base = final(await respond(client, "base"))
    line = base["conversation_id"]
    await fake_upstream.areset()
    await fake_upstream.afaults("*", [{"delay_ms": DELAY_MS}] * 2)  # both in flight together

    answers = await asyncio.gather(
        *(
            respond(servers[i % replicas], text, base["id"], stream=stream)
            for i, text in enumerate(("left", "right"))
        )
    )
    left, right = (final(answer) for answer in answers)
    assert left["status"] == right["status"] == "completed"
    # Each upstream call saw the base turn and its own input only.
    assert sorted(await prompts(fake_upstream)) == [
        ["base", "Echo: base", "left"],
        ["base", "Echo: base", "right"],
    ]
    # Two lines: one goes on the base conversation, the other on a branch of it.
    assert left["conversation_id"] != right["conversation_id"]
    assert line in (left["conversation_id"], right["conversation_id"])
    for answer, body, text in ((answers[0], left, "left"), (answers[1], right, "right")):
        conversation = body["conversation_id"]
        if replicas == 1 or not stream:  # a stream's headers leave before its turn is stored
            assert answer.headers["x-conversation-id"] == conversation
        assert await contents(client, conversation) == ["base", "Echo: base", text, f"Echo: {text}"]
        stored = (await client.get(f"/v1/responses/{body['id']}")).json()
        assert stored["conversation_id"] == conversation
    # Each branch goes on from its own response, still without the other's turn.
    await fake_upstream.areset()
    for body, text in ((left, "left"), (right, "right")):
        after = final(await respond(client, "next", body["id"]))
        assert after["conversation_id"] == body["conversation_id"]
        assert (await prompts(fake_upstream))[-1] == [
            "base", "Echo: base", text, f"Echo: {text}", "next",
        ]  # fmt: skip


async def test_an_end_taken_between_the_look_and_the_read_is_branched_from(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    database_url: str,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another replica stores its turn on the end right after this request decided to continue
    it, before the turn is read: the request branches off there instead of seeing that turn."""
    settings = make_settings(database_url=database_url)
    client: httpx.AsyncClient = await client_for(settings)
    base = final(await respond(client, "base"))
    line = base["conversation_id"]
    database = create_database(settings.database_url, pool_size=2)
    decide = response_service.start_from

    async def racing(*args: Any, **kwargs: Any) -> Any:
        start = await decide(*args, **kwargs)
        turn = [message("user", "sneaky"), message("assistant", "ok")]
        async with database.writing() as session:  # the other replica's turn, stored now
            await conversation_service.append(session, DEFAULT_TENANT, line, turn, Stamp(MODEL))
        return start

    monkeypatch.setattr(response_service, "start_from", racing)
    try:
        answer = await respond(client, "mine", base["id"])
    finally:
        await database.dispose()
    body = final(answer)
    assert body["conversation_id"] != line
    assert answer.headers["x-conversation-id"] == body["conversation_id"]
    assert (await prompts(fake_upstream))[-1] == ["base", "Echo: base", "mine"]
    assert await contents(client, body["conversation_id"]) == [
        "base", "Echo: base", "mine", "Echo: mine",
    ]  # fmt: skip
    assert await contents(client, line) == ["base", "Echo: base", "sneaky", "ok"]
