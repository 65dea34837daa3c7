"""Issue 15.3: a 200 that is not a stream is never stored as a successful empty answer.

Through a real server: a streamed request whose upstream answers 200 text/html (a proxy's
page), 200 with a JSON error, or an SSE stream that ends without a finish reason and without
``[DONE]``. The client gets an error (the door's envelope before the first chunk, the error
frame after it), never ``[DONE]`` after a quiet end, and nothing is stored as complete.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import sse_events
from tests.support.proxy import ContextgateServer

MODEL = "gpt-4o-mini"
WORDS = " ".join(f"w{i}" for i in range(30))


@pytest.fixture(scope="module")
def proxy(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[tuple[ContextgateServer, Path]]:
    directory = tmp_path_factory.mktemp("not-a-stream")
    database = directory / "contextgate.db"
    server = ContextgateServer(
        {
            "CONTEXTGATE_DATABASE_URL": f"sqlite+aiosqlite:///{database}",
            "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream_server.base_url,
            "CONTEXTGATE_MAX_RETRIES": "0",
        },
        log_path=directory / "server.log",
    )
    server.start()
    try:
        yield server, database
    finally:
        server.stop()


def _stream(server: ContextgateServer, marker: str) -> httpx.Response:
    body = {
        "model": MODEL,
        "stream": True,
        "messages": [{"role": "user", "content": f"{marker} {WORDS}"}],
    }
    with httpx.Client(base_url=server.url, timeout=30) as http:
        return http.post("/v1/chat/completions", json=body)


def _assistant_rows(database: Path, marker: str) -> list[tuple[Any, ...]]:
    """(status, content) of the assistant messages of the conversation ``marker`` started."""
    with sqlite3.connect(database) as db:
        return db.execute(
            "SELECT a.status, a.content FROM messages a WHERE a.role = 'assistant' AND "
            "a.conversation_id IN (SELECT u.conversation_id FROM messages u "
            "WHERE u.role = 'user' AND u.content LIKE ?)",
            (f"%{marker}%",),
        ).fetchall()


def _request_log(database: Path) -> tuple[Any, ...]:
    with sqlite3.connect(database) as db:
        row: tuple[Any, ...] = db.execute(
            "SELECT status, status_code, error FROM request_logs ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
    return row


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("fault", "code", "status"),
    [
        (
            {"content_type": "text/html", "body": "<html><body>Gateway login</body></html>"},
            "upstream_not_a_stream",
            502,
        ),
        (
            {
                "content_type": "application/json",
                "body": {"error": {"message": "model overloaded", "code": "overloaded"}},
            },
            "upstream_error",
            502,
        ),
    ],
)
def test_a_200_that_is_not_a_stream_is_an_error_and_nothing_is_stored(
    proxy: tuple[ContextgateServer, Path],
    fake_upstream: FakeUpstream,
    fault: dict[str, Any],
    code: str,
    status: int,
) -> None:
    server, database = proxy
    marker = f"not-a-stream-{code}"
    fake_upstream.faults("*", [fault])
    response = _stream(server, marker)
    # Nothing was streamed yet: the door's error envelope, not 200 + [DONE].
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    if code == "upstream_error":
        assert "model overloaded" in error["message"]
    else:
        assert "text/html" in error["message"]
    assert _assistant_rows(database, marker) == []
    assert _request_log(database)[:2] == ("error", status)


@pytest.mark.e2e
def test_a_stream_that_ends_without_finish_or_done_fails_and_is_stored_incomplete(
    proxy: tuple[ContextgateServer, Path], fake_upstream: FakeUpstream
) -> None:
    server, database = proxy
    marker = "ends-early"
    fake_upstream.faults("*", [{"end_early": True}])
    response = _stream(server, marker)
    assert response.status_code == 200
    events = sse_events(response)
    errors = [e for e in events if isinstance(e, dict) and "error" in e]
    assert len(errors) == 1, events
    assert errors[0]["error"]["code"] == "upstream_stream_incomplete"
    # No chunk claims a finish, no [DONE] after the error frame.
    finishes = [
        c["choices"][0].get("finish_reason")
        for c in events
        if isinstance(c, dict) and c.get("choices")
    ]
    assert not any(finishes)
    received = "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in events
        if isinstance(c, dict) and c.get("choices")
    )
    assert received.startswith("Echo: ends-early")
    rows = _assistant_rows(database, marker)
    assert [(status, orjson.loads(content)) for status, content in rows] == [
        ("incomplete", received)
    ]


@pytest.mark.e2e
def test_the_openai_sdk_sees_an_error_not_an_empty_answer(
    proxy: tuple[ContextgateServer, Path], fake_upstream: FakeUpstream
) -> None:
    server, database = proxy
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=30)
    for fault in ({"content_type": "text/html", "body": "<html></html>"}, {"end_early": True}):
        fake_upstream.faults("*", [fault])
        with pytest.raises(openai.APIError):  # noqa: PT012
            stream = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"sdk {WORDS}"}], stream=True
            )
            list(stream)
    client.close()
    with sqlite3.connect(database) as db:
        complete = db.execute(
            "SELECT count(*) FROM messages WHERE role = 'assistant' AND status = 'complete'"
        ).fetchone()[0]
    assert complete == 0


@pytest.mark.parametrize(
    "fault",
    [{"end_early": True}, {"content_type": "text/html", "body": "<html><body>login</body></html>"}],
)
async def test_through_litellm_too(
    client_for: Any, make_settings: Any, fake_upstream: FakeUpstream, fault: dict[str, Any]
) -> None:
    """litellm's stream wrapper adds a finish_reason "stop" of its own to a stream that just
    ends: what counts is what the provider sent."""
    client: httpx.AsyncClient = await client_for(make_settings(upstream_transport="litellm"))
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "hi there"}]}
    fake_upstream.faults("*", [fault])
    response = await client.post("/v1/chat/completions", json=body)
    failed = response.status_code != 200 or any(
        isinstance(e, dict) and "error" in e for e in sse_events(response)
    )
    assert failed, response.text[-500:]
    # A proper stream through litellm is still complete.
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert not [e for e in sse_events(response) if isinstance(e, dict) and "error" in e]
    statuses = []
    for conversation in (await client.get("/v1/conversations")).json()["data"]:
        detail = (await client.get(f"/v1/conversations/{conversation['id']}")).json()
        statuses += [m["status"] for m in detail["messages"] if m["role"] == "assistant"]
    assert statuses.count("complete") == 1, statuses
