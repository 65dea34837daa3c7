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


async def test_planner_decision_titles_and_cache_column(
    browser: Any,  # noqa: F811
    start_proxy: Callable[..., ContextgateServer],
    fake_upstream: FakeUpstream,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    plan = {
        "artifacts": [
            {
                "artifact_id": "inline_0",
                "strategy": "summarize",
                "priority": 1,
                "relevance_rationale": "long orchard notes",
                "summarization_focus": "fruit",
            }
        ],
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
    decision = body["context_utilization"]["planner_decision"]
    assert decision["planner"] == "llm"
    assert decision["reasoning"] == plan["reasoning"]

    browser.get(f"{server.url}/ui/conversations/{body['conversation_id']}")
    WebDriverWait(browser, 15).until(
        lambda driver: (
            driver.find_element(By.TAG_NAME, "body").get_attribute("data-inspector-ready") == "true"
        )
    )
    [title] = browser.find_elements(By.CSS_SELECTOR, "table.artifacts td.artifact-title")
    assert title.text.startswith("orchard.md")
    [cache] = browser.find_elements(By.CSS_SELECTOR, "table.artifacts td.cache")
    assert cache.text == "miss"  # summarized, not found in the summary cache
    [shown] = browser.find_elements(By.CSS_SELECTOR, "details.planner-decision")
    summary = shown.find_element(By.TAG_NAME, "summary").text
    assert "planner model fake-planner" in summary
    assert "why:" in summary
    assert "cost $" in summary
    assert plan["reasoning"] in shown.text
    [item] = shown.find_elements(By.CSS_SELECTOR, "li")
    assert item.text.startswith("orchard.md: summarize")
    assert "long orchard notes" in item.text
