"""Acceptance: the real Codex CLI's remote compaction, served by contextgate for any model.

Codex uses its built-in OpenAI provider with ``openai_base_url`` pointed at contextgate and a
low ``model_auto_compact_token_limit``: before each resumed turn it sends its history ending
with a ``compaction_trigger`` item and keeps only the ``compaction`` item it gets back. The
model behind contextgate is the fake upstream's (chat completions only, nothing OpenAI about
it); contextgate's own compaction summarizes (the fake summarizer, scripted), and the turns
after compaction carry that summary to the model. ``store: false`` (Codex's, every call) is
managed by default: no setting is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.agents import Codex
from tests.support.agents import codex_cli as codex_cli
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

EPISODE = "The user asked for task alpha; the assistant answered it."
SUMMARY = orjson.dumps(
    {"episodic": EPISODE, "facts": [{"fact": "Task alpha is done", "importance": 6}]}
).decode()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    env = {"CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer", "CONTEXTGATE_RAW_TAIL_TURNS": "0"}
    yield from module_server(tmp_path_factory, fake_upstream_server, env, name="codex-compact")


def _chats(fake: FakeUpstream, model: str) -> list[dict[str, Any]]:
    return [
        r["body"]
        for r in fake.requests()
        if r["path"].endswith("/chat/completions") and r["body"]["model"] == model
    ]


def _text(messages: list[dict[str, Any]]) -> str:
    return orjson.dumps(messages).decode()


def test_codex_compacts_resumes_and_the_model_gets_the_summary(
    codex_cli: Path, server: ContextgateServer, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    fake_upstream.script("fake-summarizer", [SUMMARY] * 6)
    codex = Codex.openai_provider(
        codex_cli, tmp_path, "gpt-4o-mini", server.base_url, compact_at=500
    )
    first = codex.exec("task alpha: say hello")
    assert first.returncode == 0, first.stderr[-2000:]
    for prompt in ("task beta: say goodbye", "task gamma: wrap up"):
        done = codex.exec("resume", "--last", prompt)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Error running remote compact task" not in done.stderr
    # Each resumed turn was compacted first: the history went to contextgate's summarizer
    # (no raw tail kept here: every whole turn before the trigger is summarized).
    summarized = _chats(fake_upstream, "fake-summarizer")
    assert summarized, "contextgate's compaction summarized the history"
    assert any("task alpha" in _text(s["messages"]) for s in summarized)
    # The turn after that compaction: the model got the summary in place of alpha's raw turn
    # (which recall may bring back, marked as recalled), then beta's raw turn and gamma.
    last = _chats(fake_upstream, "gpt-4o-mini")[-1]["messages"]
    assert "task gamma" in _text(last[-1:])
    assert any(m["role"] == "system" and EPISODE in m["content"] for m in last)
    assert {"role": "user", "content": "task alpha: say hello"} not in last
    assert {"role": "user", "content": "task beta: say goodbye"} in last
    # The raw history is still kept in contextgate's conversation, nothing dropped.
    conversations = httpx.get(f"{server.base_url}/conversations").json()["data"]
    kept = [
        httpx.get(f"{server.base_url}/conversations/{c['id']}").json()["messages"]
        for c in conversations
    ]
    texts = [_text(messages) for messages in kept]
    assert any(all(t in text for t in ("alpha", "beta", "gamma")) for text in texts)


MARKER = "compacted-loop-5c1e"


def test_codex_compacts_inside_a_tool_loop_and_finishes_it(
    codex_cli: Path, server: ContextgateServer, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    fake_upstream.script("fake-summarizer", [SUMMARY] * 6)
    codex = Codex.openai_provider(
        codex_cli, tmp_path, "gpt-4o-mini", server.base_url, compact_at=500
    )
    first = codex.exec("task alpha: say hello")
    assert first.returncode == 0, first.stderr[-2000:]
    prompt = f'task delta. CALL_TOOL:exec_command:{{"cmd": "echo {MARKER}"}}'
    done = codex.exec("resume", "--last", prompt)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Error running remote compact task" not in done.stderr
    # Compacted before the resumed turn and again inside its tool loop (between the call and
    # its output): two passes, each summarizing one more turn.
    assert len(_chats(fake_upstream, "fake-summarizer")) == 2
    turns = _chats(fake_upstream, "gpt-4o-mini")
    assert len(turns) == 3, "alpha; delta's tool call; delta's answer from the tool output"
    last = turns[-1]["messages"]
    assert last[-1]["role"] == "tool"
    assert MARKER in last[-1]["content"]
    assert last[-2]["tool_calls"][0]["function"]["name"] == "exec_command"
    assert any(m["role"] == "system" and EPISODE in m["content"] for m in last)
    assert "Tool results:" in done.stdout  # Codex finished the loop with the model's answer
    # Each message stored once: the loop's call and output were not stored again after the
    # compaction item came back.
    conversations = httpx.get(f"{server.base_url}/conversations").json()["data"]
    stored = [
        m
        for c in conversations
        for m in httpx.get(f"{server.base_url}/conversations/{c['id']}").json()["messages"]
        if m["role"] == "tool" and MARKER in str(m["content"])
    ]
    assert len(stored) == 1


NATIVE = "o4-mini"


@pytest.fixture(scope="module")
def native_server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    """An OpenAI reasoning model on the native Responses path (app/llm/native_responses.py)."""
    entry = {
        "model_name": NATIVE,
        "litellm_params": {
            "model": f"openai/{NATIVE}",
            "api_base": fake_upstream_server.base_url,
            "api_key": "sk-fake",
        },
        "model_info": {"responses_api": True},
    }
    config = tmp_path_factory.mktemp("models") / "models.yaml"
    config.write_bytes(orjson.dumps({"model_list": [entry]}))
    env = {
        "CONTEXTGATE_CONFIG": str(config),
        "CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer",
        "CONTEXTGATE_RAW_TAIL_TURNS": "0",
    }
    yield from module_server(tmp_path_factory, fake_upstream_server, env, name="codex-native-c")


def test_codex_compaction_on_the_native_responses_path(
    codex_cli: Path, native_server: ContextgateServer, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    fake_upstream.script("fake-summarizer", [SUMMARY] * 6)
    codex = Codex.openai_provider(
        codex_cli, tmp_path, NATIVE, native_server.base_url, compact_at=500
    )
    first = codex.exec("task alpha: say hello")
    assert first.returncode == 0, first.stderr[-2000:]
    for prompt in ("task beta: say goodbye", "task gamma: wrap up"):
        done = codex.exec("resume", "--last", prompt)
        assert done.returncode == 0, done.stderr[-2000:]
    assert _chats(fake_upstream, "fake-summarizer")
    calls = [r["body"] for r in fake_upstream.requests() if r["path"] == "/v1/responses"]
    assert len(calls) == 3  # one model call per turn: the compactions were contextgate's own
    last = _text(calls[-1]["input"])
    assert EPISODE in last
    assert "task gamma" in last
    assert "compaction" not in [item.get("type") for item in calls[-1]["input"]]
