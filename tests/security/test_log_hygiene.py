"""Logs never carry keys, Authorization values or provider keys in URLs (at any level), nor
message or attachment text at INFO and above. Captured in-process at DEBUG, rendered by the
JSON formatter the server uses."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.core.logging import JsonFormatter, redact
from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream

MASTER = "sk-master-hygiene-5b1c9e0d7a3f"
UPSTREAM = "sk-upstream-hygiene-2f8e4d6c0b1a"
TEXT = "USER-SECRET-TEXT-9d2c"
DOC = "ATTACHMENT-SECRET-TEXT-4e7a"


async def test_no_secret_in_any_record(
    client_for: Any,
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    client: httpx.AsyncClient = await client_for(
        make_settings(master_key=MASTER, upstream_api_key=UPSTREAM, max_retries=1,
                      retry_backoff_s=0.01)
    )  # fmt: skip
    admin = {"Authorization": f"Bearer {MASTER}"}
    key = (await client.post("/v1/keys", json={"name": "h"}, headers=admin)).json()["key"]
    auth = {"Authorization": f"Bearer {key}"}
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": TEXT}],
        "attachments": [{"content": DOC}],
    }
    assert (await client.post("/v1/chat/completions", json=body, headers=auth)).is_success
    fake_upstream.faults("*", [{"status": 500, "message": f"echo {TEXT} key={UPSTREAM}"}] * 2)
    assert (await client.post("/v1/chat/completions", json=body, headers=auth)).status_code == 502
    fake_upstream.faults("*", [{"drop_after_chunks": 2}])
    await client.post("/v1/chat/completions", json={**body, "stream": True}, headers=auth)
    await client.post("/v1/chat/completions", json=body, headers={"Authorization": key + "x"})
    logging.getLogger("contextgate.test").warning(
        "calling https://api.example/v1?key=%s with Authorization: Bearer %s",
        UPSTREAM,
        key,
        extra={"content": TEXT},
    )
    formatter = JsonFormatter()
    rendered = [formatter.format(record) for record in caplog.records]
    assert len(rendered) > 5
    everything = "\n".join(rendered)
    for secret in (MASTER, UPSTREAM, key):
        assert secret not in everything
    assert "Bearer " not in everything
    above_debug = "\n".join(
        line for line, record in zip(rendered, caplog.records, strict=True)
        if record.levelno > logging.DEBUG
    )  # fmt: skip
    assert TEXT not in above_debug
    assert DOC not in above_debug


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abc.def.ghi",
        "https://generativelanguage.googleapis.com/v1beta/models/x:generate?key=AIzaSyDUMMY0123456789abcdef",
        "postgresql://app:hunter2hunter2@db:5432/x",
        "api_key='sk-proj-abcdefghijklmnopqrstuvwx'",
        "x-api-key: sk-ant-api03-abcdefghijklmnop",
    ],
)
def test_redact_patterns(text: str) -> None:
    out = redact(text)
    assert "[redacted]" in out
    assert not any(s in out for s in ("abc.def", "AIzaSy", "hunter2", "sk-proj", "sk-ant"))
