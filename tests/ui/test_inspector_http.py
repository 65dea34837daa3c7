"""The inspector's pages in-process: content, access with a master key, no external assets."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.core.settings import Settings
from app.ui import router as ui_router
from tests.fake_upstream import FakeUpstream
from tests.support.operator_data import seed_compacted, seed_conversation

MASTER = "sk-master-ui-test"


async def test_pages_render_the_seeded_conversation(client: httpx.AsyncClient) -> None:
    seeded = await seed_conversation(client)
    listing = await client.get("/ui")
    assert listing.status_code == 200
    assert seeded.conversation_id in listing.text
    page = await client.get(f"/ui/conversations/{seeded.conversation_id}")
    assert page.status_code == 200
    html = page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for request_id in seeded.request_ids:
        assert f'data-request-id="{request_id}"' in html
    assert html.count('class="bar"') == seeded.request_count
    assert "kind-tool-call" in html
    assert "kind-tool-result" in html
    assert "get_weather" in html
    for artifact in seeded.artifacts:
        assert f"fate-{artifact['strategy']}" in html
        assert artifact["artifact_id"] in html
    # Every asset is served by the proxy itself: nothing from another origin.
    assert not re.search(r'(src|href)="(https?:)?//', html)
    for asset in re.findall(r'(?:src|href)="(/ui/static/[^"]+)"', html):
        assert (await client.get(asset)).status_code == 200


async def test_unknown_conversation_is_a_404_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/ui/conversations/conv_missing")
    assert response.status_code == 404
    assert "No conversation with id" in response.text


async def test_memories_page_lists_users_and_their_memories(client: httpx.AsyncClient) -> None:
    added = await client.post(
        "/v1/memories",
        json={"user": "bob", "content": "Prefers window seats", "memory_type": "preference"},
    )
    assert added.status_code in (200, 201), added.text
    users = await client.get("/ui/memories")
    assert users.status_code == 200
    assert "bob" in users.text
    page = await client.get("/ui/memories", params={"user": "bob"})
    assert page.status_code == 200
    assert "Prefers window seats" in page.text
    assert "preference" in page.text


async def test_master_key_guards_the_inspector(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> None:
    client: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    denied = await client.get("/ui")
    assert denied.status_code == 401
    assert 'name="key"' in denied.text  # the login form
    wrong = await client.get("/ui", params={"key": "nope"})
    assert wrong.status_code == 401
    assert "contextgate_ui" not in wrong.headers.get("set-cookie", "")
    bearer = await client.get("/ui", headers={"Authorization": f"Bearer {MASTER}"})
    assert bearer.status_code == 200

    swapped = await client.get("/ui/memories", params={"key": MASTER, "user": "x"})
    assert swapped.status_code == 303
    assert swapped.headers["location"] == "/ui/memories?user=x"  # the key leaves the URL
    cookie = swapped.headers["set-cookie"]
    assert MASTER not in cookie
    assert "httponly" in cookie.lower()
    assert (await client.get("/ui")).status_code == 200  # the cookie now opens the pages

    fresh: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    login = await fresh.post("/ui/login", data={"key": MASTER, "next": "//evil.example/x"})
    assert login.status_code == 303
    assert login.headers["location"] == "/ui"  # no open redirect
    assert (await fresh.get("/ui")).status_code == 200
    await fresh.get("/ui/logout")
    assert (await fresh.get("/ui")).status_code == 401


async def test_compactions_show_summaries_and_the_compacting_request(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client: httpx.AsyncClient = await client_for(make_settings(summarizer_model="fake-summarizer"))
    conversation_id = await seed_compacted(client, fake_upstream)
    html = (await client.get(f"/ui/conversations/{conversation_id}")).text
    assert 'class="summary' in html
    assert "The user counted turns and the assistant echoed each one." in html
    assert "The user is counting turns" in html
    assert 'class="compaction"' in html
    assert "turns_compacted" in html
    assert "seg part-memory" in html  # later requests carry the memory bundle


async def test_long_timelines_show_the_newest_messages_first(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded = await seed_conversation(client)
    monkeypatch.setattr(ui_router, "TIMELINE_MESSAGES", 3)
    page = (await client.get(f"/ui/conversations/{seeded.conversation_id}")).text
    assert "4 older messages not shown" in page
    assert page.count('<li class="message') == 3
    assert f'data-request-id="{seeded.request_ids[-1]}"' in page
    assert f'data-request-id="{seeded.request_ids[0]}"' not in page
    whole = (await client.get(f"/ui/conversations/{seeded.conversation_id}?all=1")).text
    assert whole.count('<li class="message') == 7
    assert "older messages not shown" not in whole
