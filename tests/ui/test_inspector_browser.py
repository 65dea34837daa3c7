"""The inspector in a real browser: Debian's headless Chromium driven by selenium.

Page loads, a conversation's timeline shows its requests and their bars, the browser logs no
console error, and a screenshot is kept under test-artifacts/ui/. Without chromium and
chromium-driver (``apt-get install chromium chromium-driver``, `make system-deps`) it skips,
saying so.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.operator_data import seed_conversation
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
MASTER = "sk-master-browser-test"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "chromium and chromium-driver are not installed "
            "(apt-get install chromium chromium-driver, or `make system-deps` as root)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1600",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


async def test_timeline_in_chromium(
    browser: Any, start_proxy: Callable[..., ContextgateServer]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    server = start_proxy({"CONTEXTGATE_MASTER_KEY": MASTER})
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {MASTER}"}, timeout=30
    ) as client:
        seeded = await seed_conversation(client)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    wait = WebDriverWait(browser, 15)

    # Without the key: the login form. With ?key= once: a cookie, and the key leaves the URL.
    browser.get(f"{server.url}/ui")
    assert browser.find_element(By.ID, "login-form")
    # The login page answers 401, which the browser logs; nothing else may log an error.
    expected = [entry["message"] for entry in console_errors(browser)]
    assert all("401 (Unauthorized)" in message for message in expected), expected
    browser.get(f"{server.url}/ui?key={MASTER}")
    wait.until(expected_conditions.presence_of_element_located((By.ID, "conversations")))
    assert "key=" not in browser.current_url
    link = browser.find_element(
        By.CSS_SELECTOR, f'a[href="/ui/conversations/{seeded.conversation_id}"]'
    )
    browser.save_screenshot(str(ARTIFACTS / "conversations.png"))
    link.click()

    wait.until(
        lambda driver: (
            driver.find_element(By.TAG_NAME, "body").get_attribute("data-inspector-ready") == "true"
        )
    )
    requests = browser.find_elements(By.CSS_SELECTOR, "li.request")
    assert [r.get_attribute("data-request-id") for r in requests] == seeded.request_ids
    for request in requests:
        bar = request.find_element(By.CSS_SELECTOR, ".bar")
        assert bar.size["width"] > 0
        assert bar.size["height"] > 0
        segments = bar.find_elements(By.CSS_SELECTOR, ".seg")
        assert segments, "every request sent some tokens"
        assert all(segment.size["width"] > 0 for segment in segments)
        parts = {segment.get_attribute("data-part") for segment in segments}
        assert "current" in parts
    body = browser.find_element(By.TAG_NAME, "body")
    assert body.get_attribute("data-request-bars") == str(seeded.request_count)
    assert browser.find_elements(By.CSS_SELECTOR, "li.kind-tool-call")
    assert browser.find_elements(By.CSS_SELECTOR, "li.kind-tool-result")
    fates = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "table.artifacts .fate")}
    assert fates == {artifact["strategy"] for artifact in seeded.artifacts}
    browser.find_element(By.ID, "toggle-all").click()
    assert browser.find_element(By.ID, "toggle-all").text == "collapse all"
    browser.save_screenshot(str(ARTIFACTS / "conversation.png"))
    assert (ARTIFACTS / "conversation.png").stat().st_size > 0

    browser.get(f"{server.url}/ui/memories")
    wait.until(expected_conditions.presence_of_element_located((By.TAG_NAME, "h1")))
    assert console_errors(browser) == []
