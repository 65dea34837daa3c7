"""Acceptance: the real Codex CLI (``codex exec``) against contextgate's Responses door.

Codex is configured with a model provider whose ``wire_api`` is ``responses`` and whose base
URL is contextgate; the fake upstream behind it (chat completions only) asks for Codex's own
``exec_command`` tool; Codex runs it, continues with the function output, and prints the
final answer. Installed from npm by ``make agents`` (or here, the same way); the test skips,
saying why, only when npm cannot install it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.agents import Codex
from tests.support.agents import codex_cli as codex_cli
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MARKER = "codex-was-here-7f3a"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(tmp_path_factory, fake_upstream_server, name="codex")


def test_codex_exec_completes_a_tool_loop_through_contextgate(
    codex_cli: Path, server: ContextgateServer, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    codex = Codex.responses_provider(codex_cli, tmp_path, "gpt-4o-mini", server.base_url)
    prompt = f'Run this. CALL_TOOL:exec_command:{{"cmd": "echo {MARKER}"}}'
    done = codex.exec(prompt)
    assert done.returncode == 0, done.stderr[-2000:]
    chats = [r["body"] for r in fake_upstream.requests() if r["path"].endswith("/chat/completions")]
    assert len(chats) == 2, "one call for the tool, one with its output"
    names = [tool["function"]["name"] for tool in chats[0]["tools"]]
    assert "exec_command" in names
    assert chats[0]["stream"] is True  # Codex streams: the typed-event renderer answered it
    call, output = chats[1]["messages"][-2:]
    assert call["tool_calls"][0]["function"]["name"] == "exec_command"
    assert output["role"] == "tool"
    assert output["tool_call_id"] == call["tool_calls"][0]["id"]
    assert MARKER in output["content"]  # Codex ran the command and sent its output back
    # Codex printed the model's final answer, made from that output (the fake echoes a bounded
    # prefix of it: the shell's own start-up noise, e.g. pyenv's, may push the marker past it).
    assert "Tool results:" in done.stdout
    assert output["content"].split("\n", 1)[0] in done.stdout
