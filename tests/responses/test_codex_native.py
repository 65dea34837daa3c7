"""Acceptance: the real Codex CLI on an OpenAI reasoning model, through contextgate's native
Responses path (app/llm/native_responses.py).

Codex sends ``store: false``, ``include: ["reasoning.encrypted_content"]`` and its whole
history on every call, its reasoning items with their ``encrypted_content`` included. The fake
upstream serves ``/v1/responses`` as OpenAI does and refuses encrypted reasoning it did not
issue or that was altered: the tool loop finishing, with the first call's reasoning item in the
second call's input byte for byte, is the proof that contextgate passed it through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.agents import Codex
from tests.support.agents import codex_cli as codex_cli
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MARKER = "codex-native-5c1e"
MODEL = "o4-mini"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    entry = {
        "model_name": MODEL,
        "litellm_params": {
            "model": f"openai/{MODEL}",
            "api_base": fake_upstream_server.base_url,
            "api_key": "sk-fake",
        },
        "model_info": {"responses_api": True},
    }
    config = tmp_path_factory.mktemp("models") / "models.yaml"
    config.write_bytes(orjson.dumps({"model_list": [entry]}))
    env = {"CONTEXTGATE_CONFIG": str(config)}
    yield from module_server(tmp_path_factory, fake_upstream_server, env, name="codex-native")


def test_codex_tool_loop_carries_encrypted_reasoning(
    codex_cli: Path, server: ContextgateServer, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    codex = Codex.responses_provider(codex_cli, tmp_path, MODEL, server.base_url)
    prompt = f'Run this. CALL_TOOL:exec_command:{{"cmd": "echo {MARKER}"}}'
    done = codex.exec(prompt)
    assert done.returncode == 0, done.stderr[-2000:]
    calls = [r["body"] for r in fake_upstream.requests() if r["path"] == "/v1/responses"]
    assert len(calls) == 2, "one call for the tool, one with its output"
    assert not [r for r in fake_upstream.requests() if r["path"] == "/v1/chat/completions"]
    first, second = calls
    assert (first["store"], second["store"]) == (False, False)
    assert first["stream"] is True
    assert "reasoning.encrypted_content" in first["include"]
    issued = [i for i in second["input"] if i.get("type") == "reasoning"]
    assert len(issued) == 1
    assert issued[0]["encrypted_content"].startswith("gAAAAB")
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert MARKER in str(outputs[-1]["output"])  # Codex ran the command and sent its output
    assert "(reasoning items carried: 1)" in done.stdout
