"""The doors' direct route (app/core/door_route.py) answers exactly as FastAPI's handler does:
every request below is sent once on the direct path and once with FastAPI's (a dependency
override, which the direct path leaves to FastAPI), and the answers are compared; a well-formed
turn skips FastAPI's dependency solving, anything else goes through it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fastapi.routing
import httpx
import pytest

from app.chat.router import router as chat_router
from app.core.door_route import door_plan
from app.core.settings import Settings
from app.messages.router import router as messages_router
from app.responses.router import router as responses_router

MASTER = "sk-master-door-route-1c2d"
JSON = {"content-type": "application/json"}
AUTH = {"authorization": f"Bearer {MASTER}"}

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {**CHAT, "max_tokens": 16}
RESPONSES = {"model": "gpt-4o-mini", "input": "hi"}
DOORS = {"/v1/chat/completions": CHAT, "/v1/messages": MESSAGES, "/v1/responses": RESPONSES}

# (name, headers, raw body) for each door; ``{good}`` is replaced by the door's good body
BAD_REQUESTS: list[tuple[str, dict[str, str], bytes]] = [
    ("invalid body", {**JSON, **AUTH}, b'{"messages": 3}'),
    ("not JSON", {**JSON, **AUTH}, b'{"model": '),
    ("JSON null", {**JSON, **AUTH}, b"null"),
    ("JSON list", {**JSON, **AUTH}, b"[1, 2]"),
    ("empty body", {**JSON, **AUTH}, b""),
    ("text/plain", {"content-type": "text/plain", **AUTH}, b"{good}"),
    ("no content type", AUTH, b"{good}"),
    ("NUL in a string", {**JSON, **AUTH}, b'{"model": "a\\u0000b"}'),
    ("wrong key, good body", {**JSON, "authorization": "Bearer nope"}, b"{good}"),
    ("wrong key, bad body", {**JSON, "authorization": "Bearer nope"}, b'{"messages": 3}'),
    ("no key", JSON, b"{good}"),
]


def _standard_path(application: Any) -> None:
    """A dependency override sends every door request through FastAPI's own handler."""

    def never_used() -> None:  # overrides a dependency no route has
        return None

    application.dependency_overrides[never_used] = never_used


@pytest.fixture
def solves(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths FastAPI solved dependencies for."""
    seen: list[str] = []
    original = fastapi.routing.solve_dependencies

    async def counting(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["request"].url.path)
        return await original(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", counting)
    return seen


async def _clients(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> tuple[httpx.AsyncClient, httpx.AsyncClient]:
    direct: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    standard: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    _standard_path(standard._transport.app)  # type: ignore[attr-defined]
    return direct, standard


@pytest.mark.parametrize("path", list(DOORS))
async def test_every_refused_request_is_answered_as_fastapi_answers_it(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    solves: list[str],
    path: str,
) -> None:
    direct, standard = await _clients(client_for, make_settings)
    good = httpx.Request("POST", "/", json=DOORS[path]).content
    for name, headers, raw in BAD_REQUESTS:
        body = good if raw == b"{good}" else raw
        got = await direct.post(path, content=body, headers=headers)
        expected = await standard.post(path, content=body, headers=headers)
        assert got.status_code == expected.status_code, name
        assert got.status_code >= 400, name
        assert got.json() == expected.json(), name


@pytest.mark.parametrize("path", list(DOORS))
async def test_a_good_turn_skips_dependency_solving_and_keeps_its_headers(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    solves: list[str],
    path: str,
) -> None:
    direct, standard = await _clients(client_for, make_settings)
    for client, solved, key in ((direct, 0, "k-direct"), (standard, 3, "k-standard")):
        solves.clear()
        first = await client.post(path, json=DOORS[path], headers=AUTH)
        assert first.status_code == 200, first.text
        conversation = first.headers["x-conversation-id"]
        again = {**AUTH, "x-conversation-id": conversation, "idempotency-key": key}
        second = await client.post(path, json=DOORS[path], headers=again)
        assert second.status_code == 200, second.text
        assert second.headers["x-conversation-id"] == conversation  # the header was read
        replay = await client.post(path, json=DOORS[path], headers=again)
        assert replay.json() == second.json()  # the idempotency key was read
        assert len(solves) == solved


async def test_routes_of_other_shapes_are_fastapis() -> None:
    plans = {
        (route.path, *sorted(route.methods)): door_plan(route)
        for router in (chat_router, messages_router, responses_router)
        for route in router.routes
        if isinstance(route, fastapi.routing.APIRoute)
    }
    doors = {key for key, plan in plans.items() if plan is not None}
    assert doors == {
        ("/v1/chat/completions", "POST"),
        ("/v1/messages", "POST"),
        ("/v1/messages/count_tokens", "POST"),
        ("/v1/responses", "POST"),
    }
    chat = plans[("/v1/chat/completions", "POST")]
    assert chat is not None
    assert chat.headers == (
        ("x_conversation_id", "x-conversation-id"),
        ("idempotency_key", "idempotency-key"),
    )
    assert [name for name, _, _ in chat.dependencies] == ["caller", "state"]
