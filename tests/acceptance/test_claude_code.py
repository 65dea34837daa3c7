"""Acceptance: Claude Code (``claude -p``) runs a tool loop through contextgate.

Claude Code speaks Anthropic's Messages API to ``ANTHROPIC_BASE_URL`` (contextgate), streaming,
with ``anthropic-beta`` flags, two dozen tools, a long system prompt, extended thinking
(``MAX_THINKING_TOKENS``) and the whole history on every call. contextgate sends it through
litellm's anthropic provider to the fake upstream's Anthropic /v1/messages, which signs its
thinking and refuses (400) a tool loop whose thinking does not come back intact.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fake_upstream import FakeUpstream
from tests.fake_upstream.anthropic import sign
from tests.support.agents import CLAUDE_CODE, npm_agent
from tests.support.models import fake_model_list
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "claude-sonnet-4-5"  # what Claude Code asks for; routed to the fake by model_list
SMALL_MODEL = "claude-haiku-4-5"
MASTER_KEY = "sk-cg-acceptance-master"
MARKER = "contextgate-ok"


@pytest.fixture(scope="module")
def claude() -> Path:
    found = npm_agent(*CLAUDE_CODE)
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    directory = tmp_path_factory.mktemp("claude-code")
    config = fake_model_list(
        directory, fake_upstream_server, names=(), anthropic=(MODEL, SMALL_MODEL)
    )
    env = {
        "CONTEXTGATE_DATABASE_URL": f"sqlite+aiosqlite:///{directory / 'contextgate.db'}",
        "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream_server.base_url,
        "CONTEXTGATE_CONFIG": str(config),
        "CONTEXTGATE_MASTER_KEY": MASTER_KEY,
        "CONTEXTGATE_MAX_RETRIES": "0",
    }
    with ContextgateServer(env, log_path=directory / "server.log") as running:
        yield running


def run_claude(claude: Path, server: ContextgateServer, prompt: str, home: Path) -> dict[str, Any]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": MASTER_KEY,  # sent as x-api-key
        "ANTHROPIC_MODEL": MODEL,
        "ANTHROPIC_SMALL_FAST_MODEL": SMALL_MODEL,
        "MAX_THINKING_TOKENS": "2048",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    work = home / "work"
    work.mkdir(exist_ok=True)
    done = subprocess.run(
        [str(claude), "-p", prompt, "--allowedTools", "Bash", "--output-format", "json"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"claude failed: {done.stdout[-2000:]} {done.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_claude_code_tool_loop_with_thinking(
    claude: Path, server: ContextgateServer, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    command = json.dumps({"command": f"echo {MARKER}", "description": "Print a marker"})
    result = run_claude(claude, server, f"CALL_TOOL:Bash:{command}", tmp_path)
    assert result["is_error"] is False, result
    assert result["result"] == f"Tool results: {MARKER}"  # Claude Code ran the tool

    calls = [r for r in fake_upstream.requests() if r["path"] == "/v1/messages"]
    loop = [c for c in calls if c["body"]["model"] == "claude-sonnet-4-5-20250929"]
    assert len(loop) >= 2
    first, last = loop[0]["body"], loop[-1]["body"]
    # What Claude Code sends reached the upstream: tools, a long system prompt, betas, thinking.
    assert len(first["tools"]) > 12
    assert sum(len(block["text"]) for block in first["system"]) > 5000
    assert "interleaved-thinking-2025-05-14" in loop[0]["headers"]["anthropic-beta"]
    assert first["thinking"]["type"] == "enabled"
    # The last call carries the first answer's thinking, signed as the upstream issued it.
    assistant = next(m for m in last["messages"] if m["role"] == "assistant")
    thinking = assistant["content"][0]
    assert thinking["type"] == "thinking"
    assert thinking["signature"] == sign(thinking["thinking"])
    assert assistant["content"][1]["type"] == "tool_use"
    tool_result = last["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result"
    assert MARKER in json.dumps(tool_result["content"])

    # One stored conversation holds the loop.
    headers = {"Authorization": f"Bearer {MASTER_KEY}"}
    listed = httpx.get(f"{server.base_url}/conversations", headers=headers, timeout=10).json()
    conversation = max(listed["data"], key=lambda c: c["message_count"])
    messages = httpx.get(
        f"{server.base_url}/conversations/{conversation['id']}", headers=headers, timeout=10
    ).json()["messages"]
    assert [m["role"] for m in messages][-4:] == ["user", "assistant", "tool", "assistant"]


def test_keys_by_x_api_key_or_bearer(server: ContextgateServer) -> None:
    """The same server, without Claude Code: both ways of sending a key, and 401 in
    Anthropic's envelope."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    url = f"{server.base_url}/messages/count_tokens"
    for headers in ({"x-api-key": MASTER_KEY}, {"Authorization": f"Bearer {MASTER_KEY}"}):
        assert httpx.post(url, json=body, headers=headers, timeout=10).status_code == 200
    for headers in ({}, {"x-api-key": "sk-wrong"}):
        refused = httpx.post(url, json=body, headers=headers, timeout=10)
        assert refused.status_code == 401
        assert refused.json()["type"] == "error"
        assert refused.json()["error"]["type"] == "authentication_error"
