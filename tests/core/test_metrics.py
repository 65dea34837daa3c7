"""GET /metrics after real traffic, parsed with prometheus_client's own parser."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest

from app.context.metadata import (
    ArtifactOutcome,
    CacheStats,
    ContextBreakdown,
    ContextUtilization,
)
from app.core import metrics
from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.support.metrics import parse, scrape, value
from tests.support.proxy import ContextgateServer


@pytest.fixture(autouse=True)
def fresh_model_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Earlier tests may have used up the bounded model-label set of this process."""
    monkeypatch.setattr(metrics, "_models", set())


def chat(content: str, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], **extra}


async def test_metrics_after_chat_traffic(client: httpx.AsyncClient) -> None:
    before = await scrape(client)
    plain = await client.post("/v1/chat/completions", json=chat("hello metrics"))
    assert plain.status_code == 200
    conversation_id = plain.json()["conversation_id"]
    streamed = await client.post(
        "/v1/chat/completions", json=chat("stream it", stream=True, conversation_id=conversation_id)
    )
    assert streamed.status_code == 200
    assert "[DONE]" in streamed.text
    missing = await client.get("/v1/conversations/conv_nope")
    assert missing.status_code == 404
    after = await scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    route = "/v1/chat/completions"
    assert delta("contextgate_http_requests_total", route=route, status="200") == 2
    assert delta("contextgate_http_request_duration_seconds_count", route=route) == 2
    assert (
        delta(
            "contextgate_http_requests_total",
            route="/v1/conversations/{conversation_id}",
            status="404",
        )
        == 1
    )
    assert delta("contextgate_upstream_latency_seconds_count", model="gpt-4o-mini") == 2
    assert delta("contextgate_tokens_total", model="gpt-4o-mini", direction="prompt") > 0
    assert delta("contextgate_tokens_total", model="gpt-4o-mini", direction="completion") > 0
    assert delta("contextgate_chat_requests_total", model="gpt-4o-mini", status="ok") == 2
    # The families exist even before any planner, cache or compaction activity.
    for name in (
        "contextgate_cost_usd_total",
        "contextgate_context_tokens_saved_total",
    ):
        assert any(n == name for n, _ in after), name
    assert ("contextgate_summary_cache_total", frozenset({("result", "hit")})) in after


def test_record_chat_counts_planning_cache_compaction_and_fallbacks() -> None:
    """What the context engine and memory report in context_utilization becomes metrics."""
    utilization = ContextUtilization(
        model_name="metrics-unit-model",
        strategy="llm_planning",
        llm_planning_used=True,
        breakdown=ContextBreakdown(system=10, history=100, artifacts=50, current=20),
        artifacts_processed=[
            ArtifactOutcome(
                artifact_id="att_1",
                source="doc",
                artifact_type="document",
                strategy="summarize",
                original_size_chars=4000,
                processed_size_chars=400,
                cache_hit=True,
            )
        ],
        cache_stats=CacheStats(
            hits=1,
            misses=2,
            cached_tokens=1000,
            cache_write_tokens=300,
            cache_write_1h_tokens=100,
            cache_read_cost=0.0003,
            cache_write_cost=0.00135,
        ),
        compaction={"turns_compacted": 3, "tokens_before": 900, "tokens_after": 200},
        notes=["planner failed: invalid JSON; deterministic plan used"],
    )
    before = parse(generate_latest().decode())
    figures = metrics.ChatFigures(
        prompt_tokens=180,
        completion_tokens=7,
        prompt_cost=0.25,
        completion_cost=0.5,
        planning_cost=0.125,
        full_context_tokens=1130,
        notes=tuple(utilization.notes),
    )
    metrics.record_chat(utilization, "ok", figures)
    after = parse(generate_latest().decode())

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    model = "metrics-unit-model"
    assert delta("contextgate_planner_calls_total", model=model) == 1
    assert delta("contextgate_planner_fallbacks_total", model=model) == 1
    assert delta("contextgate_context_degraded_total", model=model) == 1
    assert delta("contextgate_summary_cache_total", result="hit") == 1
    assert delta("contextgate_summary_cache_total", result="miss") == 2
    assert delta("contextgate_compactions_total", model=model) == 1
    assert delta("contextgate_artifacts_total", strategy="summarize") == 1
    # history left out 1000 + artifact (4000 - 400) / 4 + compaction 700
    assert delta("contextgate_context_tokens_saved_total", model=model) == 1000 + 900 + 700
    assert delta("contextgate_cost_usd_total", model=model) == 0.875
    assert delta("contextgate_tokens_total", model=model, direction="prompt") == 180
    # The provider's prompt cache: reads, and writes by lifetime, with what they cost.
    cache_tokens = "contextgate_prompt_cache_tokens_total"
    assert delta(cache_tokens, model=model, kind="read") == 1000
    assert delta(cache_tokens, model=model, kind="write_5m") == 200
    assert delta(cache_tokens, model=model, kind="write_1h") == 100
    cache_cost = "contextgate_prompt_cache_cost_usd_total"
    assert delta(cache_cost, model=model, kind="read") == pytest.approx(0.0003)
    assert delta(cache_cost, model=model, kind="write") == pytest.approx(0.00135)


async def test_tokens_saved_when_history_is_trimmed(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> None:
    client = await client_for(make_settings())
    history: list[dict[str, Any]] = []
    before = await scrape(client)
    for turn in range(6):
        history.append({"role": "user", "content": f"turn {turn} " + "lorem ipsum " * 60})
        body = {"model": "gpt-4o-mini", "messages": history, "context": {"max_input_tokens": 400}}
        response = await client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        history.append(response.json()["choices"][0]["message"])
    excluded = response.json()["context_utilization"]["messages_excluded"]
    assert excluded > 0
    after = await scrape(client)
    saved = value(after, "contextgate_context_tokens_saved_total", model="gpt-4o-mini") - value(
        before, "contextgate_context_tokens_saved_total", model="gpt-4o-mini"
    )
    assert saved > 0


@pytest.mark.e2e
def test_multiprocess_metrics_with_two_workers(
    start_proxy: Callable[..., ContextgateServer], fake_upstream: FakeUpstream
) -> None:
    """``serve --workers 2`` aggregates every worker's samples in one /metrics."""
    server = start_proxy(workers=2)

    def send(index: int) -> int:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            response = http.post("/v1/chat/completions", json=chat(f"worker traffic {index}"))
            return response.status_code

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(send, range(8))) == [200] * 8
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    # Multiprocess mode: samples come from the workers' files, not one process's registry.
    assert "python_gc_objects_collected_total" not in text
    samples = parse(text)
    route = "/v1/chat/completions"
    assert value(samples, "contextgate_http_requests_total", route=route, status="200") == 8
    assert value(samples, "contextgate_chat_requests_total", model="gpt-4o-mini") == 8


def test_client_chosen_labels_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Model names and methods come from clients: they cannot grow the series without end."""
    monkeypatch.setattr(metrics, "MAX_MODEL_LABELS", 2)
    names = [f"bounded-model-{index}" for index in range(5)]
    labels = [metrics.model_label(name) for name in names]
    assert labels[:2] == names[:2]
    assert labels[2:] == ["other"] * 3
    assert metrics.model_label(names[0]) == names[0]  # a known name stays itself
    before = parse(generate_latest().decode())
    metrics.record_http("BREW", "unmatched", 405, 0.01)
    after = parse(generate_latest().decode())
    assert value(after, "contextgate_http_requests_total", method="OTHER", route="unmatched") == (
        value(before, "contextgate_http_requests_total", method="OTHER", route="unmatched") + 1
    )


def test_a_labelled_child_is_made_once_and_keeps_counting() -> None:
    """``record_*`` keep each (metric, labels) child; what they count is what ``labels`` would."""
    route = "/v1/test-children"
    before = parse(generate_latest().decode())
    for _ in range(3):
        metrics.record_http("POST", route, 200, 0.01)
    after = parse(generate_latest().decode())
    count = value(after, "contextgate_http_requests_total", method="POST", route=route)
    assert count == value(before, "contextgate_http_requests_total", method="POST", route=route) + 3
    child = metrics._children[(metrics.HTTP_REQUESTS, "POST", route, "200")]
    assert child is metrics.HTTP_REQUESTS.labels("POST", route, "200")
