"""``contextgate conversations list|show`` and ``doctor`` through typer's runner, against a real
SQLite database filled through the app (chat requests to the fake upstream)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.support.cli import invoke
from tests.support.operator_data import Seeded, seed_compacted, seed_conversation
from tests.support.proxy import free_port


@pytest.fixture
async def seeded(client: httpx.AsyncClient) -> Seeded:
    return await seed_conversation(client)


def test_conversations_list_shows_the_seeded_conversation(seeded: Seeded, sqlite_url: str) -> None:
    code, output = invoke({"CONTEXTGATE_DATABASE_URL": sqlite_url}, "conversations", "list")
    assert code == 0, output
    assert seeded.conversation_id in output
    assert "default" in output  # the tenant
    lines = output.splitlines()
    index = next(i for i, line in enumerate(lines) if seeded.conversation_id in line)
    row = " ".join(lines[index : index + 2])  # piped: two plain lines per conversation
    assert "gpt-4o-mini" in row
    assert f"requests {seeded.request_count} " in row


def test_conversations_show_has_messages_tool_steps_and_requests(
    seeded: Seeded, sqlite_url: str
) -> None:
    code, output = invoke(
        {"CONTEXTGATE_DATABASE_URL": sqlite_url}, "conversations", "show", seeded.conversation_id
    )
    assert code == 0, output
    assert "messages and tool steps" in output
    assert "What is the weather in Paris?" in output
    assert "assistant (tool call)" in output
    assert "get_weather" in output
    assert "tool ← call_" in output
    assert "requests: tokens sent by part" in output
    for part in ("system", "history", "artifacts", "memory", "current", "overhead"):
        assert part in output
    for request_id in seeded.request_ids:
        assert request_id in output
    used = [r["context_utilization"]["tokens_used"] for r in seeded.responses]
    budget = seeded.responses[0]["context_utilization"]["max_input_tokens"]
    for tokens in used:
        assert f"{tokens}/{budget}" in output
    if seeded.artifacts:  # the context engine reports artifacts: their fates are listed
        assert "artifacts: included, summarized, extracted or excluded" in output
        for artifact in seeded.artifacts:
            assert artifact["strategy"] in output


def test_conversations_show_unknown_id_fails_with_one_line(sqlite_url: str) -> None:
    code, output = invoke(
        {"CONTEXTGATE_DATABASE_URL": sqlite_url}, "conversations", "show", "conv_missing"
    )
    assert code == 1
    assert "No conversation with id 'conv_missing'" in output


def test_conversations_list_scoped_by_tenant(seeded: Seeded, sqlite_url: str) -> None:
    code, output = invoke(
        {"CONTEXTGATE_DATABASE_URL": sqlite_url},
        "conversations",
        "list",
        "--tenant",
        "key_someone_else",
    )
    assert code == 0, output
    assert seeded.conversation_id not in output


def test_doctor_all_green(
    sqlite_url: str, fake_upstream: FakeUpstream, redis_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "models.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: local\n"
        "    litellm_params:\n"
        "      model: openai/fake-model\n"
        f"      api_base: {fake_upstream.base_url}\n"
        "      api_key: os.environ/DOCTOR_TEST_KEY\n"
    )
    code, output = invoke(
        {
            "CONTEXTGATE_DATABASE_URL": sqlite_url,
            "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream.base_url,
            "CONTEXTGATE_REDIS_URL": redis_url,
            "CONTEXTGATE_CONFIG": str(config),
            "DOCTOR_TEST_KEY": "sk-doctor",
        },
        "doctor",
    )
    assert code == 0, output
    lines = output.splitlines()
    names = ("settings", "database", "redis", "upstream", "model local", "token encodings")
    for name in (*names, "embedder"):
        assert any(line.startswith(f"✓ {name}") for line in lines), (name, output)
    assert "✗" not in output


def test_doctor_red_lines_say_how_to_fix(tmp_path: Path) -> None:
    dead = free_port()
    code, output = invoke(
        {
            "CONTEXTGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}",
            "CONTEXTGATE_UPSTREAM_BASE_URL": f"http://127.0.0.1:{dead}/v1",
            "CONTEXTGATE_REDIS_URL": f"redis://127.0.0.1:{dead}/0",
            "TIKTOKEN_CACHE_DIR": str(tmp_path / "no-encodings"),
        },
        "doctor",
    )
    assert code == 1
    lines = output.splitlines()
    for name, fix in (
        ("database", "contextgate migrate"),
        ("redis", "CONTEXTGATE_REDIS_URL"),
        ("upstream", "check the URL"),
        ("token encodings", "TIKTOKEN_CACHE_DIR"),
    ):
        index = next(i for i, line in enumerate(lines) if line.startswith(f"✗ {name}"))
        assert fix in lines[index + 1], (name, output)


def test_doctor_reports_bad_settings() -> None:
    code, output = invoke({"CONTEXTGATE_DATABASE_URL": "nonsense"}, "doctor")
    assert code == 1
    assert "✗ settings" in output
    assert "CONTEXTGATE_DATABASE_URL" in output


async def test_conversations_show_lists_compaction_summaries(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    sqlite_url: str,
) -> None:
    client: httpx.AsyncClient = await client_for(make_settings(summarizer_model="fake-summarizer"))
    conversation_id = await seed_compacted(client, fake_upstream)
    code, output = await asyncio.to_thread(
        invoke, {"CONTEXTGATE_DATABASE_URL": sqlite_url}, "conversations", "show", conversation_id
    )
    assert code == 0, output
    assert "compaction summaries" in output
    assert "The user counted turns" in output
    assert "compaction {" in output  # the request that compacted says what it did


def test_conversations_show_last_messages(seeded: Seeded, sqlite_url: str) -> None:
    code, output = invoke(
        {"CONTEXTGATE_DATABASE_URL": sqlite_url},
        "conversations",
        "show",
        seeded.conversation_id,
        "--last",
        "2",
    )
    assert code == 0, output
    assert "(5 older messages not shown: drop --last)" in output
    assert "Summarise the attached travel notes." in output
    assert "What is the weather in Paris?" not in output
    assert seeded.request_ids[-1] in output
    assert seeded.request_ids[0] not in output
