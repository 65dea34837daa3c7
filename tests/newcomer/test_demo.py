"""Issue 17 point 4: ``contextgate serve --demo`` answers through the real HTTP stack."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.support.proxy import REPO, free_port

DOC = " ".join(f"Paragraph {i}: the orchard in row {i} grows apples and pears." for i in range(120))
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The one-liner of the README, run in an empty directory with no provider configured."""
    cwd = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTGATE_")}
    env["PYTHONPATH"] = str(REPO)
    port = free_port()
    log = (cwd / "demo.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--demo", "--port", str(port)],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert process.poll() is None, (cwd / "demo.log").read_text()
        try:
            if httpx.get(f"{url}/health", timeout=0.5).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url
    process.terminate()
    process.wait(timeout=30)
    log.close()
    assert (cwd / "contextgate-demo.db").is_file()  # its own database file


def _extras(response: Any) -> dict[str, Any]:
    return dict(response.model_extra or {})


def test_demo_answers_remembers_and_reports(demo: str) -> None:
    client = openai.OpenAI(base_url=f"{demo}/v1", api_key="sk-demo", max_retries=0)
    first = client.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": "My name is Ada. Hello!"}]
    )
    assert first.choices[0].message.content is not None
    assert first.choices[0].message.content.startswith("Demo answer")
    assert first.usage is not None
    assert first.usage.prompt_tokens > 0
    conversation_id = _extras(first)["conversation_id"]
    second = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "What is my name?"}],
        extra_body={"conversation_id": conversation_id},
    )
    assert "Your name is Ada." in (second.choices[0].message.content or "")
    utilization = _extras(second)["context_utilization"]
    assert utilization["breakdown"]["history"] > 0


def test_demo_counts_as_contextgate_does(demo: str) -> None:
    """The demo counts with the tokenizer contextgate uses for the model's name (one tokenizer
    in memory, not two): its usage and contextgate's report agree."""
    client = openai.OpenAI(base_url=f"{demo}/v1", api_key="sk-demo", max_retries=0)
    text = "Привет, 世界! def f(x): return x**2  # naïve café, ½ ≠ ∞ 🙂"
    answer = client.chat.completions.create(
        model="demo", messages=[{"role": "user", "content": text}]
    )
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == _extras(answer)["context_utilization"]["tokens_used"]


def test_demo_calls_tools_when_asked_and_streams(demo: str) -> None:
    client = openai.OpenAI(base_url=f"{demo}/v1", api_key="sk-demo", max_retries=0)
    called = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "Use get_weather for Paris, please."}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    [call] = called.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert call.function.arguments == '{"city":"Paris"}'  # type: ignore[union-attr]
    answered = client.chat.completions.create(
        model="demo",
        messages=[
            {"role": "user", "content": "Use get_weather for Paris, please."},
            called.choices[0].message.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": call.id, "content": "18C"},
        ],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    # a result too short to be a sentence is still quoted
    assert answered.choices[0].message.content == "Demo answer from the tool result: 18C"
    stream = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "Stream a hello."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text.startswith("Demo answer")


def test_demo_plans_and_summarizes_attachments_and_shows_them_in_the_inspector(
    demo: str,
) -> None:
    client = openai.OpenAI(base_url=f"{demo}/v1", api_key="sk-demo", max_retries=0)
    answer = client.chat.completions.create(
        model="demo",
        messages=[{"role": "user", "content": "What grows in the orchard?"}],
        extra_body={
            "attachments": [{"content": DOC, "title": "orchard.md"}],
            "context": {"planning": "always"},
        },
    )
    utilization = _extras(answer)["context_utilization"]
    assert utilization["llm_planning_used"] is True, utilization["notes"]
    [artifact] = utilization["artifacts_processed"]
    assert artifact["strategy"] == "summarize"
    assert artifact["processed_size_chars"] < artifact["original_size_chars"]
    page = httpx.get(f"{demo}/ui", timeout=10)
    assert page.status_code == 200
    assert _extras(answer)["conversation_id"] in page.text
