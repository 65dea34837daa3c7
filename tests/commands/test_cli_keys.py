"""``contextgate keys create|list|revoke`` against a real SQLite database, checked through the
app: a key made by the CLI opens the API, a revoked one no longer does."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import httpx

from app.core.settings import Settings
from tests.support.cli import MASTER, invoke_on


async def test_keys_create_list_revoke(
    sqlite_url: str,
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
) -> None:
    code, output = await asyncio.to_thread(
        invoke_on, sqlite_url, "keys", "create", "ci-bot", "--rpm-limit", "60"
    )
    assert code == 0, output
    key = re.search(r"^key: (\S+)$", output, re.MULTILINE)
    key_id = re.search(r"^created (key_\w+)", output, re.MULTILINE)
    assert key is not None
    assert key_id is not None
    assert key.group(1).startswith("sk-cg-")

    client: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    auth = {"Authorization": f"Bearer {key.group(1)}"}
    assert (await client.get("/v1/conversations", headers=auth)).status_code == 200
    # A key issued through the API shows in the CLI's list as well.
    made = await client.post(
        "/v1/keys", json={"name": "from-api"}, headers={"Authorization": f"Bearer {MASTER}"}
    )
    assert made.status_code in (200, 201), made.text

    code, output = await asyncio.to_thread(invoke_on, sqlite_url, "keys", "list")
    assert code == 0, output
    assert key_id.group(1) in output
    assert "ci-bot" in output
    assert "from-api" in output
    assert key.group(1) not in output  # listed by prefix only

    code, output = await asyncio.to_thread(invoke_on, sqlite_url, "keys", "revoke", key_id.group(1))
    assert code == 0, output
    assert (await client.get("/v1/conversations", headers=auth)).status_code == 401
    code, output = await asyncio.to_thread(invoke_on, sqlite_url, "keys", "list")
    assert key_id.group(1) not in output

    code, output = await asyncio.to_thread(invoke_on, sqlite_url, "keys", "revoke", key_id.group(1))
    assert code == 1
    assert "No key with id" in output


def test_keys_need_the_master_key(sqlite_url: str) -> None:
    code, output = invoke_on(sqlite_url, "keys", "list", master=None)
    assert code == 2
    assert "CONTEXTGATE_MASTER_KEY" in output
