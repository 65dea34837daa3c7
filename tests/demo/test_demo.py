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


def test_demo_compacts_a_conversation_that_outgrows_its_budget(demo: str) -> None:
    """Long turns in an 800-token budget: the demo answers the compaction call in the
    summarizer's JSON format, and the request that no longer fits reports its compaction.
    (``compaction_ratio: 1`` keeps the background compaction after each answer from running
    first, which would leave every request's ``compaction`` null.)"""
    client = openai.OpenAI(base_url=f"{demo}/v1", api_key="sk-demo", max_retries=0)
    context = {"max_input_tokens": 800, "compaction_ratio": 1}
    conversation_id: str | None = None
    reports: list[dict[str, Any]] = []
    for turn in range(1, 8):
        extra: dict[str, Any] = {"context": context}
        if conversation_id is not None:
            extra["conversation_id"] = conversation_id
        text = f"My name is Ada. Turn {turn}. " + " ".join(
            f"Note {i}: the billing service stores invoices in PostgreSQL." for i in range(25)
        )
        answer = client.chat.completions.create(
            model="demo", messages=[{"role": "user", "content": text}], extra_body=extra
        )
        conversation_id = _extras(answer)["conversation_id"]
        utilization = _extras(answer)["context_utilization"]
        assert utilization["tokens_used"] <= 800, utilization
        if utilization["compaction"] is not None:
            reports.append(utilization)
    assert reports, "no request reported a compaction"
    first = reports[0]
    compaction = first["compaction"]
    assert compaction["trigger"] == "before_request"
    assert compaction["error"] is None, compaction
    assert compaction["turns_compacted"] >= 1
    assert compaction["summarizer_calls"] >= 1
    assert compaction["tokens_after"] < compaction["tokens_before"]
    assert first["breakdown"]["memory"] > 0  # the episodic summary is sent
    assert first["notes"] == []
    stored = httpx.get(f"{demo}/v1/conversations/{conversation_id}", timeout=10).json()
    [summary, *_] = [s for s in stored["summaries"] if s["id"] in compaction["summary_ids"]]
    assert summary["kind"] == "compaction"
    assert summary["method"] == "llm"  # the demo's JSON was understood, not a fallback
    assert summary["model"] == "demo-summarizer"
    assert summary["episodic"].startswith("Demo summary of earlier turns")
    assert "The user's name is Ada." in [fact["fact"] for fact in summary["facts"]]


def test_demo_extracts_memories_and_injects_them_later(demo: str) -> None:
    """With a ``user`` and ``memory_extraction: every_turn`` the demo answers the extraction
    call; a later conversation of the same user gets the memory injected."""
    client = openai.OpenAI(base_url=f"{demo}/v1", api_key="sk-demo", max_retries=0)
    told = client.chat.completions.create(
        model="demo",
        user="ada",
        messages=[{"role": "user", "content": "My name is Ada. I look after the orchard."}],
        extra_body={"context": {"memory_extraction": "every_turn"}},
    )
    # nothing to recall for a new user is no fallback ("no room left" was noted here)
    assert _extras(told)["context_utilization"]["notes"] == []
    deadline = time.monotonic() + 30
    memories: list[dict[str, Any]] = []
    while not memories and time.monotonic() < deadline:  # extraction runs after the answer
        listed = httpx.get(f"{demo}/v1/memories", params={"user": "ada"}, timeout=10)
        memories = listed.json()["data"]
        time.sleep(0.1)
    [memory] = memories
    assert memory["content"] == "The user's name is Ada."
    assert memory["source"] == "extraction"
    assert memory["conversation_id"] == _extras(told)["conversation_id"]
    asked = client.chat.completions.create(
        model="demo", user="ada", messages=[{"role": "user", "content": "What is my name?"}]
    )
    utilization = _extras(asked)["context_utilization"]
    assert [m["id"] for m in utilization["memories_injected"]] == [memory["id"]]
    assert utilization["breakdown"]["memory"] > 0
    # the demo quotes the question it got: the memory block came with it
    assert "The user's name is Ada." in (asked.choices[0].message.content or "")
    someone_else = client.chat.completions.create(
        model="demo", user="bob", messages=[{"role": "user", "content": "What is my name?"}]
    )
    assert _extras(someone_else)["context_utilization"]["memories_injected"] == []
