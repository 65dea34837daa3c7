"""The Vercel AI SDK's default OpenAI model (``openai("gpt-4o-mini")`` is the Responses API,
``store`` on) in node, against a running contextgate and the fake upstream: three turns with
a function tool. The SDK resends its earlier output as ``item_reference`` items; contextgate
resolves them to the stored items, so the model sees every earlier turn and the turns go on
one stored conversation, nothing stored twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.npm import AI_SDK, npm_libraries
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).parent / "ai_sdk" / "three_turns.mjs"
ASKS = [
    'Weather in Paris? CALL_TOOL:get_weather:{"city": "Paris"}',
    'And in Rome? CALL_TOOL:get_weather:{"city": "Rome"}',
    "Thanks.",
]


@pytest.fixture(scope="module")
def ai_sdk() -> Path:
    found = npm_libraries(AI_SDK[0], AI_SDK[1])
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(tmp_path_factory, fake_upstream_server, name="aisdk")


def run_turns(ai_sdk: Path, server: ContextgateServer, sent_log: Path) -> list[dict[str, Any]]:
    script = ai_sdk / SCRIPT.name  # beside its node_modules, where node resolves them
    shutil.copyfile(SCRIPT, script)
    env = {
        **os.environ,
        "CONTEXTGATE_BASE_URL": server.base_url,
        "ASKS": json.dumps(ASKS),
        "SENT_LOG": str(sent_log),
    }
    done = subprocess.run(
        ["node", str(script)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def chat_calls(fake: FakeUpstream) -> list[list[dict[str, Any]]]:
    return [
        r["body"]["messages"] for r in fake.requests() if r["path"].endswith("/chat/completions")
    ]


def seen(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (m["role"], m["tool_calls"][0]["function"]["name"] if m.get("tool_calls") else m["content"])
        for m in messages
    ]


def test_three_turns_with_a_tool_and_item_references(
    ai_sdk: Path, server: ContextgateServer, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    sent_log = tmp_path / "sent.jsonl"
    turns = run_turns(ai_sdk, server, sent_log)
    assert [turn["text"] for turn in turns] == [
        "Tool results: sunny, 21C in Paris",
        "Tool results: sunny, 21C in Rome",
        "Echo: Thanks.",
    ]
    assert [turn["toolResults"] for turn in turns] == [
        ["sunny, 21C in Paris"], ["sunny, 21C in Rome"], [],
    ]  # fmt: skip
    # What the SDK sent: store on, and its earlier output as item references.
    sent = [json.loads(line) for line in sent_log.read_text().splitlines()]
    assert len(sent) == 5  # two steps for each tool turn, one for the last
    assert all(body.get("store", True) is not False for body in sent)
    references = [item["id"] for item in sent[-1]["input"] if item.get("type") == "item_reference"]
    assert len(references) == 2, "the SDK did not refer to its two earlier answers"
    # The model saw every earlier turn, the referenced items resolved to what was stored.
    last = seen(chat_calls(fake_upstream)[-1])
    assert last == [
        ("user", ASKS[0]),
        ("assistant", "get_weather"),
        ("tool", "sunny, 21C in Paris"),
        ("assistant", "Tool results: sunny, 21C in Paris"),
        ("user", ASKS[1]),
        ("assistant", "get_weather"),
        ("tool", "sunny, 21C in Rome"),
        ("assistant", "Tool results: sunny, 21C in Rome"),
        ("user", "Thanks."),
    ]
    # One stored conversation holding the three turns once.
    listed = httpx.get(f"{server.base_url}/conversations").json()["data"]
    assert len(listed) == 1
    stored = httpx.get(f"{server.base_url}/conversations/{listed[0]['id']}").json()["messages"]
    assert [(m["role"], m["content"]) for m in stored][-2:] == [
        ("user", "Thanks."),
        ("assistant", "Echo: Thanks."),
    ]
    assert len(stored) == 10
