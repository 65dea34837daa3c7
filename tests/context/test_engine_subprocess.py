"""The context engine in the real server (`contextgate serve`), driven by the OpenAI SDK."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.attachments.pdf import text_pdf
from tests.fake_upstream import FakeUpstream


@pytest.mark.e2e
def test_uploaded_pdf_planned_and_summarized_through_the_real_server(
    start_proxy: Callable[..., Any], fake_upstream: FakeUpstream
) -> None:
    server = start_proxy(
        {
            "CONTEXTGATE_PLANNER_MODEL": "fake-planner",
            "CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer",
        }
    )
    upload = httpx.post(
        f"{server.base_url}/attachments",
        files={"file": ("report.pdf", text_pdf("The vault code is 4471"), "application/pdf")},
        timeout=30,
    )
    assert upload.status_code == 201, upload.text
    attachment_id = upload.json()["id"]
    plan = {
        "artifacts": [
            {"artifact_id": attachment_id, "strategy": "summarize", "priority": 1},
            {"artifact_id": "made_up", "strategy": "include_full", "priority": 1},
        ]
    }
    fake_upstream.script("fake-planner", [orjson.dumps(plan).decode()])
    fake_upstream.script("fake-summarizer", ["Vault code: 4471."])
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-x")
    response = client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "What is the vault code?"}],
        extra_body={
            "attachments": [{"attachment_id": attachment_id}],
            "context": {"planning": "always"},
        },
    )
    data = response.model_dump()
    usage = data["context_utilization"]
    assert usage["strategy"] == "llm_planning"
    [outcome] = usage["artifacts_processed"]
    assert outcome == {
        "artifact_id": attachment_id,
        "source": f"attachment:{attachment_id}",
        "artifact_type": "document",
        "strategy": "summarize",
        "original_size_chars": len("The vault code is 4471"),
        "processed_size_chars": len("Vault code: 4471."),
        "cache_hit": False,
        "carried": False,
        "title": "report.pdf",
    }
    assert any("unknown artifact ids" in note for note in usage["notes"])
    assert data["cost"]["planning_cost"] == usage["planning_cost"]["total_cost"]
    sent = [r["body"] for r in fake_upstream.requests() if r["body"]["model"] == "fake-model"]
    assert "Vault code: 4471." in sent[-1]["messages"][0]["content"]
