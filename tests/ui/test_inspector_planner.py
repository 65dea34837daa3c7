"""Issue 17 point 10, in headless Chromium: artifacts by title, the cache column filled, and a
request's planner decision (why, the plan, its cost) on the conversation page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.proxy import ContextgateServer
from tests.ui.test_inspector_browser import browser  # noqa: F401  (the shared Chromium)

pytestmark = pytest.mark.e2e

DOC = "\n\n".join(f"Row {i}: the orchard grows apples and pears." for i in range(200))
NOTE = "Cherries are picked first, in June."


async def test_planner_decision_titles_and_cache_column(
    browser: Any,  # noqa: F811
    start_proxy: Callable[..., ContextgateServer],
    fake_upstream: FakeUpstream,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    orchard = {
        "artifact_id": "inline_0",
        "strategy": "summarize",
        "priority": 1,
        "relevance_rationale": "long orchard notes",
        "summarization_focus": "fruit",
    }
    plan = {
        "artifacts": [orchard],
        "reasoning": "one long document: summarize it for the fruit question",
    }
    fake_upstream.script("fake-planner", [orjson.dumps(plan).decode()])
    fake_upstream.script("fake-summarizer", ["SUMMARY: apples and pears."])
    server = start_proxy(
        {
            "CONTEXTGATE_PLANNER_MODEL": "fake-planner",
            "CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer",
        }
    )
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        response = await client.post(
            "/v1/chat/completions",
            json={
                "model": "fake-model",
                "messages": [{"role": "user", "content": "Which fruit grows there?"}],
                "attachments": [{"content": DOC, "title": "orchard.md", "source": "notes"}],
                "context": {"planning": "always"},
            },
        )
        assert response.status_code == 200, response.text
        body = response.json()
        # The same document again, beside a short one the planner includes in full: its
        # summary comes from the summary cache (same content, focus and summarizer).
        again = {
            "artifacts": [
                {**orchard, "priority": 2},
                {
                    "artifact_id": "inline_1",
                    "strategy": "include_full",
                    "priority": 1,
                    "relevance_rationale": "short and to the point",
                },
            ],
            "reasoning": "the orchard notes again, and a short note in full",
        }
        fake_upstream.script("fake-planner", [orjson.dumps(again).decode()])
        second = await client.post(
            "/v1/chat/completions",
            json={
                "model": "fake-model",
                "conversation_id": body["conversation_id"],
                "messages": [{"role": "user", "content": "And which fruit is picked first?"}],
                "attachments": [
                    {"content": DOC, "title": "orchard.md", "source": "notes"},
                    {"content": NOTE, "title": "picking.txt", "source": "notes"},
                ],
                "context": {"planning": "always"},
            },
        )
    assert second.status_code == 200, second.text
    decision = body["context_utilization"]["planner_decision"]
    assert decision["planner"] == "llm"
    assert decision["reasoning"] == plan["reasoning"]
    reused = second.json()["context_utilization"]
    assert reused["cache_stats"]["hits"] == 1, reused
    assert reused["planning_usage"]["summarizer_calls"] == 0, reused
    summarized = [r for r in fake_upstream.requests() if r["body"]["model"] == "fake-summarizer"]
    assert len(summarized) == 1  # only the first request asked the summarizer

    browser.get(f"{server.url}/ui/conversations/{body['conversation_id']}")
    WebDriverWait(browser, 15).until(
        lambda driver: (
            driver.find_element(By.TAG_NAME, "body").get_attribute("data-inspector-ready") == "true"
        )
    )
    [first_request, second_request] = browser.find_elements(By.CSS_SELECTOR, "li.request")
    [title] = first_request.find_elements(By.CSS_SELECTOR, "table.artifacts td.artifact-title")
    assert title.text.startswith("orchard.md")
    [cache] = first_request.find_elements(By.CSS_SELECTOR, "table.artifacts td.cache")
    assert cache.text == "miss"  # summarized, not found in the summary cache
    rows = {
        row.find_element(By.CSS_SELECTOR, "td.artifact-title").text.split()[0]: row.find_element(
            By.CSS_SELECTOR, "td.cache"
        ).text
        for row in second_request.find_elements(By.CSS_SELECTOR, "table.artifacts tbody tr")
    }
    assert rows == {"orchard.md": "hit", "picking.txt": "–"}  # an include_full has no cache
    assert "summary cache 1 hit / 0 miss" in second_request.text
    [shown, shown_again] = browser.find_elements(By.CSS_SELECTOR, "details.planner-decision")
    assert [item.text.split(":")[0] for item in shown_again.find_elements(By.TAG_NAME, "li")] == [
        "orchard.md",
        "picking.txt",
    ]
    summary = shown.find_element(By.TAG_NAME, "summary").text
    assert "planner model fake-planner" in summary
    assert "why:" in summary
    assert "cost $" in summary
    assert plan["reasoning"] in shown.text
    [item] = shown.find_elements(By.CSS_SELECTOR, "li")
    assert item.text.startswith("orchard.md: summarize")
    assert "long orchard notes" in item.text
