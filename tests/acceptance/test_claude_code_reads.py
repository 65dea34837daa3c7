"""Acceptance (issue 27): real Claude Code reads files in one task through contextgate under a
small budget, against an Anthropic-shaped upstream that counts 1.2x contextgate's tokens and
refuses what Anthropic refuses (tests/fake_upstream/anthropic.py).

From what the upstream received: no request refused, thinking on every call, each prompt
starting with the previous one (marks aside) except at the rare rebases contextgate logged,
no prompt over the budget by the upstream's count; and Claude Code finishes its task.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.fake_upstream import anthropic as fake_anthropic
from tests.support.agents import CLAUDE_CODE, npm_agent
from tests.support.claude_code import (
    FINAL,
    SMALL_UPSTREAM,
    UPSTREAM,
    read_script,
    run_claude,
    write_files,
)
from tests.support.models import ANTHROPIC_LITELLM_MODEL
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL, SMALL_MODEL = "claude-sonnet-4-5", "claude-haiku-4-5"
SCALE = 1.2  # the upstream's tokens per contextgate token (Claude's tokenizer vs tiktoken)
BUDGET = 80_000  # in the upstream's tokens; Claude Code's own prompt and tools take ~42k
CLAUDE_MAX_TOKENS = 32_000  # what Claude Code 2.1 asks for: contextgate reserves it
READS = 7


@pytest.fixture(scope="module")
def claude() -> Path:
    found = npm_agent(*CLAUDE_CODE)
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream(token_scale=SCALE) as running:
        yield running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, fake: FakeUpstream) -> Iterator[Any]:
    directory = tmp_path_factory.mktemp("claude-reads")
    # The window whose budget (window - Claude Code's max_tokens - 5% margin) is BUDGET.
    window = math.ceil((BUDGET + CLAUDE_MAX_TOKENS) / 0.95)
    upstream = {"api_base": fake.url, "api_key": "sk-ant-fake-upstream"}
    config = {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {"model": ANTHROPIC_LITELLM_MODEL, **upstream},
                "model_info": {"max_input_tokens": window},
            },
            {
                "model_name": SMALL_MODEL,
                "litellm_params": {"model": f"anthropic/{SMALL_UPSTREAM}", **upstream},
            },
        ]
    }
    (directory / "models.json").write_bytes(orjson.dumps(config))
    database = directory / "contextgate.db"
    env = {
        "CONTEXTGATE_DATABASE_URL": f"sqlite+aiosqlite:///{database}",
        "CONTEXTGATE_UPSTREAM_BASE_URL": fake.base_url,
        "CONTEXTGATE_CONFIG": str(directory / "models.json"),
        "CONTEXTGATE_MAX_RETRIES": "0",
    }
    with ContextgateServer(env, log_path=directory / "server.log") as running:
        yield running, database


def _plain(value: Any) -> Any:
    """Marks aside, and one text block read as its string (the same prompt to Anthropic)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    plain = {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    content = plain.get("content")
    if isinstance(content, list) and len(content) == 1 and set(content[0]) == {"type", "text"}:
        plain["content"] = content[0]["text"]
    return plain


def _kept(previous: dict[str, Any], current: dict[str, Any]) -> bool:
    before, after = _plain(previous), _plain(current)
    if (before["system"], before["tools"]) != (after["system"], after["tools"]):
        return False
    kept: bool = after["messages"][: len(before["messages"])] == before["messages"]
    return kept


def test_claude_code_reads_files_through_a_small_budget(
    claude: Path, server: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    running, database = server
    paths = write_files(tmp_path / "work" / "src", READS, tokens=(3000, 5000))
    fake.reset()
    fake.script(UPSTREAM, read_script(paths))
    result = run_claude(
        claude, running.url, "sk-cg", tmp_path, "Read every module under src/, one at a time.",
        model=MODEL, small_model=SMALL_MODEL, timeout=600,
    )  # fmt: skip
    assert result["is_error"] is False, result
    assert result["result"] == FINAL  # the task finished: every Read answered, then the end

    records = [
        r for r in fake.requests() if r["path"] == "/v1/messages" and r["body"]["model"] == UPSTREAM
    ]
    bodies = [r["body"] for r in records]
    assert len(bodies) == READS + 1
    for record, body in zip(records, bodies, strict=True):
        fake_anthropic.check(body, record["headers"].get("anthropic-beta", ""))  # no refusal
        assert body["thinking"]["type"] == "enabled"  # thinking on every call
        assert fake_anthropic.prompt_tokens(body, SCALE) <= BUDGET  # by the upstream's count

    with closing(sqlite3.connect(database)) as connection:
        rows = connection.execute(
            "SELECT context_utilization FROM request_logs WHERE model = ? ORDER BY created_at",
            (MODEL,),
        ).fetchall()
    logged = [orjson.loads(row[0]) for row in rows]
    assert len(logged) == len(bodies)
    rebased = [u["cache_stats"]["rebased"] for u in logged]
    breaks = [n for n in range(1, len(bodies)) if not _kept(bodies[n - 1], bodies[n])]
    assert all(rebased[n] for n in breaks), (breaks, rebased)  # the prefix moved only at rebases
    assert 1 <= sum(rebased[1:]) <= 2, rebased  # the budget was reached, and rebases are rare
    assert not any(u.get("thinking_disabled") for u in logged)
    assert logged[-1]["calibration"]["ratio"] == pytest.approx(SCALE, abs=0.05)
