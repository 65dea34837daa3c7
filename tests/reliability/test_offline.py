"""Issue 24.6: behind a firewall no request reaches out anywhere but to its configured upstream.

litellm fetched its Anthropic beta-headers map from the internet, synchronously with a 5 s
timeout, on the first Claude request carrying an ``anthropic-beta`` header (the AI SDK and
opencode send one): the whole server froze meanwhile. The server here runs with an audit hook
(tests/support/netguard/sitecustomize.py) that refuses, and writes down, every socket connect
and name lookup not to the fake upstream's loopback port: a firewall that answers at once. The
offline switches contextgate sets itself are not inherited from the test process, so the
server's own defaults are what is tested. Every door, a Claude model (litellm's anthropic
provider) with ``anthropic-beta`` and an OpenAI-compatible one, streamed or not, and the other
endpoints: not one refused attempt.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.models import fake_model_list
from tests.support.proxy import REPO, ContextgateServer

pytestmark = pytest.mark.e2e

NETGUARD = REPO / "tests" / "support" / "netguard"
# What contextgate sets by itself (app/core/offline.py): the server must not get them from us.
OFFLINE_SWITCHES = (
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS",
    "TIKTOKEN_CACHE_DIR",
)
BETA = {"anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14"}


def _pythonpath() -> list[str]:
    return [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[tuple[ContextgateServer, Path]]:
    directory = tmp_path_factory.mktemp("offline")
    config = fake_model_list(directory, fake_upstream_server, anthropic=("claude-fake",))
    refused = directory / "refused.log"
    refused.touch()
    port = httpx.URL(fake_upstream_server.url).port
    server = ContextgateServer(
        {
            "CONTEXTGATE_DATABASE_URL": f"sqlite+aiosqlite:///{directory / 'proxy.db'}",
            "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream_server.base_url,
            "CONTEXTGATE_CONFIG": str(config),
            "CONTEXTGATE_MAX_RETRIES": "0",
            "CONTEXTGATE_PLANNER_MODEL": "fake-planner",
            "CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer",
            "PYTHONPATH": os.pathsep.join([str(NETGUARD), *_pythonpath()]),
            "CG_NETGUARD_LOG": str(refused),
            "CG_NETGUARD_PORTS": str(port),
        },
        log_path=directory / "server.log",
        unset=OFFLINE_SWITCHES,
    )
    server.start()
    try:
        yield server, refused
    finally:
        server.stop()


def _requests(model: str) -> list[tuple[str, dict[str, object]]]:
    chat = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
    anthropic = {**chat, "max_tokens": 32}
    responses = {"model": model, "input": "hello"}
    return [
        ("/v1/chat/completions", chat),
        ("/v1/chat/completions", {**chat, "stream": True}),
        ("/v1/messages", anthropic),
        ("/v1/messages", {**anthropic, "stream": True}),
        ("/v1/messages/count_tokens", chat),
        ("/v1/responses", responses),
        ("/v1/responses", {**responses, "stream": True}),
    ]


def test_no_request_connects_anywhere_but_the_upstream(
    guarded: tuple[ContextgateServer, Path], fake_upstream: FakeUpstream
) -> None:
    server, refused = guarded
    with httpx.Client(base_url=server.url, timeout=60, headers=BETA) as http:
        for model in ("claude-fake", "gpt-4o-mini"):
            for path, body in _requests(model):
                response = http.post(path, json=body)
                assert response.status_code == 200, (model, path, response.text)
        embedded = http.post("/v1/embeddings", json={"model": "gpt-4o-mini", "input": "hello"})
        assert embedded.status_code == 200, embedded.text
        memory = {"user": "u1", "content": "likes green tea"}
        assert http.post("/v1/memories", json=memory).status_code == 200
        assert http.get("/v1/memories", params={"user": "u1"}).status_code == 200
        attachment = {"content": "a document", "title": "doc"}
        assert http.post("/v1/attachments", json=attachment).status_code == 201
        for path in ("/health", "/ready", "/metrics", "/v1/models", "/v1/conversations"):
            assert http.get(path).status_code == 200, path
    assert any(call["path"].endswith("/messages") for call in fake_upstream.requests())
    assert refused.read_text() == "", refused.read_text()


def test_the_guard_refuses_and_records(tmp_path: Path) -> None:
    """The guard itself: a lookup of a name outside loopback is refused before it is made."""
    refused = tmp_path / "refused.log"
    env = {
        **os.environ, "PYTHONPATH": str(NETGUARD), "CG_NETGUARD_LOG": str(refused),
        "CG_NETGUARD_PORTS": "1",
    }  # fmt: skip
    code = (
        "import socket\ntry:\n socket.getaddrinfo('example.invalid', 443)\n"
        "except ConnectionRefusedError:\n print('refused')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "refused", out
    assert "example.invalid" in refused.read_text()
