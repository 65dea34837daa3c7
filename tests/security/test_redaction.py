"""Issue 15.1: the operator's upstream key never reaches a tenant, the database or a log.

The fake upstream answers 401 "Incorrect API key provided: <the key it got>", as OpenAI does,
or breaks a stream off with an SSE error event saying so after the first content chunk. Through
a real server (openai SDK and plain HTTP, streamed and not) the key appears in none of: the
client's answer, the request_log row, the server's log. Keys both key-shaped (``sk-proj-…``)
and not (a model_list ``os.environ/NAME`` value, a plain upstream key) are masked: the first by
shape, the others because contextgate registered every secret it knows at start.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from app.core.metrics import model_label
from app.core.redact import MASK, Redactor, configure_redaction, redact
from tests.fake_upstream import FakeUpstream
from tests.support.e2e import sse_events
from tests.support.proxy import ContextgateServer

# Every test secret holds "s3cr3t" (tests/plugins/log_capture.py fails the session on it).
UPSTREAM_PLAIN = "upstream-s3cr3t-q81k4m2x7w"
CONFIG_SECRET = "cfg-s3cr3t-93f1c0d7e2b4aa"
SHAPED = "sk-proj-s3cr3tAbC123dEf456gHi789"


@pytest.fixture(scope="module")
def proxy(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[tuple[ContextgateServer, Path]]:
    directory = tmp_path_factory.mktemp("redaction")
    config = directory / "models.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: from-config\n"
        "    litellm_params:\n"
        "      model: openai/fake-model\n"
        f"      api_base: {fake_upstream_server.base_url}\n"
        "      api_key: os.environ/HARDEN_PROVIDER_KEY\n"
        "  - model_name: shaped\n"
        "    litellm_params:\n"
        "      model: openai/fake-model\n"
        f"      api_base: {fake_upstream_server.base_url}\n"
        f"      api_key: {SHAPED}\n"
    )
    database = directory / "contextgate.db"
    server = ContextgateServer(
        {
            "CONTEXTGATE_DATABASE_URL": f"sqlite+aiosqlite:///{database}",
            "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream_server.base_url,
            "CONTEXTGATE_UPSTREAM_API_KEY": UPSTREAM_PLAIN,
            "CONTEXTGATE_CONFIG": str(config),
            "CONTEXTGATE_MAX_RETRIES": "0",
            "HARDEN_PROVIDER_KEY": CONFIG_SECRET,
        },
        log_path=directory / "server.log",
    )
    server.start()
    try:
        yield server, database
    finally:
        server.stop()


SECRETS = (UPSTREAM_PLAIN, CONFIG_SECRET, SHAPED)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("model", "secret"),
    [("gpt-4o-mini", UPSTREAM_PLAIN), ("from-config", CONFIG_SECRET), ("shaped", SHAPED)],
)
@pytest.mark.parametrize("stream", [False, True])
def test_quoted_upstream_key_reaches_no_client_row_or_log(
    proxy: tuple[ContextgateServer, Path],
    fake_upstream: FakeUpstream,
    model: str,
    secret: str,
    stream: bool,
) -> None:
    server, database = proxy
    fake_upstream.faults("*", [{"status": 401, "quote_key": True}])
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=30)
    marker = f"redaction-{model}-{stream}"
    messages: Any = [{"role": "user", "content": marker}]
    with pytest.raises(openai.APIStatusError) as caught:  # noqa: PT012
        result = client.chat.completions.create(model=model, messages=messages, stream=stream)
        if stream:
            list(result)  # type: ignore[arg-type]
    client.close()
    # The fake upstream did quote the key it was given: the test would catch a leak.
    sent = fake_upstream.requests()[-1]["headers"]["authorization"]
    assert sent == f"Bearer {secret}"
    answer = caught.value.response.text
    assert caught.value.status_code == 502
    assert "Incorrect API key provided" in answer
    assert MASK in answer
    for value in SECRETS:
        assert value not in answer

    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT error, context_utilization FROM request_logs WHERE error LIKE ?",
            ("%Incorrect API key%",),
        ).fetchall()
    assert rows
    stored = repr(rows)
    for value in SECRETS:
        assert value not in stored

    log = (server.log_path or Path()).read_text(errors="replace")
    assert log
    for value in SECRETS:
        assert value not in log


@pytest.mark.e2e
def test_streamed_error_frame_is_redacted(
    proxy: tuple[ContextgateServer, Path], fake_upstream: FakeUpstream
) -> None:
    """A key quoted mid-stream (an SSE error event after the first content chunk, when the
    client already has its 200) is masked in the error frame, the request log and the log."""
    server, database = proxy
    fake_upstream.faults("*", [{"error_after_chunks": 2, "quote_key": True}])
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response = http.post(
            "/v1/chat/completions",
            json={
                "model": "shaped",
                "messages": [{"role": "user", "content": "mid-stream"}],
                "stream": True,
            },
        )
    assert fake_upstream.requests()[-1]["headers"]["authorization"] == f"Bearer {SHAPED}"
    assert response.status_code == 200, response.text
    events = sse_events(response)
    errors = [i for i, event in enumerate(events) if isinstance(event, dict) and "error" in event]
    assert errors, events
    # The first content chunk reached the client before the error frame.
    contents = [
        i
        for i, event in enumerate(events)
        if isinstance(event, dict)
        and any((c.get("delta") or {}).get("content") for c in event.get("choices") or [])
    ]
    assert contents, events
    assert contents[0] < errors[0]
    message = events[errors[0]]["error"]["message"]
    assert "Incorrect API key provided" in message
    assert MASK in message
    for value in SECRETS:
        assert value not in response.text

    with sqlite3.connect(database) as db:
        row = db.execute(
            "SELECT status, error, context_utilization FROM request_logs WHERE id = ?",
            (response.headers["x-request-id"],),
        ).fetchone()
    assert row is not None
    assert row[0] != "ok"
    assert "Incorrect API key provided" in row[1]
    assert MASK in row[1]
    stored = repr(row) + repr(
        [path.read_bytes() for path in database.parent.glob(f"{database.name}*")]
    )
    log = (server.log_path or Path()).read_text(errors="replace")
    for value in SECRETS:
        assert value not in stored
        assert value not in log


def test_redactor_masks_known_secrets_and_key_shapes() -> None:
    redactor = Redactor(["plain-operator-value-1", None, "abc"])
    text = (
        "key plain-operator-value-1, sk-ant-api03-AbCdEf123456, sk-proj-ab****************xyz1,"
        " sk-cg-9f8e7d6c5b4a, Authorization: Bearer eyJhbGciOi.x-y, AKIAABCDEFGHIJKLMNOP,"
        " token=0123456789abcdef0123456789abcdef, api key: QWxhZGRpbjpvcGVuIHNlc2FtZTEyMzQ1Ng=="
    )
    masked = redactor(text)
    for secret in (
        "plain-operator-value-1", "AbCdEf123456", "ab****", "9f8e7d6c5b4a", "eyJhbGciOi",
        "AKIAABCDEFGHIJKLMNOP", "0123456789abcdef", "QWxhZGRpbjpvcGVuIHNlc2FtZTEyMzQ1Ng",
    ):  # fmt: skip
        assert secret not in masked, (secret, masked)
    # Too short to be a secret, and ordinary prose, stay as they are.
    assert redactor("abc: the key insight is tokens, 4096 max_tokens") == (
        "abc: the key insight is tokens, 4096 max_tokens"
    )


def test_start_registers_config_and_environment_secrets() -> None:
    configure_redaction(
        "master-s3cr3t-value",
        params=[{"api_key": "deploy-s3cr3t-value", "api_base": "http://upstream.example"}],
        environ={"ANTHROPIC_API_KEY": "anthropic-s3cr3t", "HOME": "/home/someone"},
    )
    text = "master-s3cr3t-value deploy-s3cr3t-value anthropic-s3cr3t http://upstream.example"
    assert redact(text) == f"{MASK} {MASK} {MASK} http://upstream.example"
    assert redact("/home/someone") == "/home/someone"
    # A key sent as a model name never becomes a metric label.
    assert model_label("sk-proj-AbCdEf0123456789") == "other"
    assert model_label("deploy-s3cr3t-value") == "other"


def test_a_remembered_redaction_follows_the_secrets_added_later() -> None:
    """Short texts are remembered with their redaction; a secret added later is masked in a
    text redacted before it was known."""
    redactor = Redactor()
    late = "late-s3cr3t-7d1e0c9b"
    note = f"planner failed: the planner answered with {late}"
    assert redactor(note) == note
    assert redactor(note) == note  # remembered
    redactor.add(late)
    assert redactor(note) == f"planner failed: the planner answered with {MASK}"
    long_text = ("x " * 2000) + late
    assert redactor(long_text).endswith(MASK)  # not remembered: still redacted
