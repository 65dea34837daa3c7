"""Issue 17 points 2 and 9: unknown models, helper models without a route, stacked retries."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.support.models import fake_model_list

DOC = "\n\n".join(f"Section {i}: the orchard grows apples in row {i}." for i in range(150))


def _chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "What grows?"}], **extra}


@pytest.fixture
async def listed_only(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> httpx.AsyncClient:
    """A model_list with two names and no upstream for the others (planner: the default)."""
    config = fake_model_list(tmp_path, fake_upstream, names=("fake-model", "local"))
    client: httpx.AsyncClient = await client_for(
        make_settings(upstream_base_url=None, config=config)
    )
    return client


async def test_unknown_model_is_404_naming_the_served_models(
    listed_only: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    response = await listed_only.post("/v1/chat/completions", json=_chat("gpt-5-nope"))
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "model_not_found"
    assert error["param"] == "model"
    assert "gpt-5-nope" in error["message"]
    assert "fake-model, local" in error["message"]
    assert fake_upstream.requests() == []
    listed = (await listed_only.get("/v1/conversations")).json()
    assert listed["data"] == []  # nothing stored


async def test_unknown_model_without_any_routing_is_404(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> None:
    """Neither a model_list nor an upstream: litellm finds no provider for the name."""
    client = await client_for(make_settings(upstream_base_url=None))
    response = await client.post("/v1/chat/completions", json=_chat("nonsense-model-17"))
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "model_not_found"
    assert "nonsense-model-17" in error["message"]
    assert "openai/gpt-4o-mini" in error["message"]  # how to name a model litellm knows


async def test_unroutable_planner_falls_back_to_the_request_model(
    listed_only: httpx.AsyncClient, fake_upstream: FakeUpstream
) -> None:
    stored = (await listed_only.post("/v1/attachments", json={"content": DOC})).json()
    decision = {"artifact_id": stored["id"], "strategy": "include_full", "priority": 1}
    plan = {"artifacts": [decision], "reasoning": "the request's own model planned"}
    fake_upstream.script("fake-model", [orjson.dumps(plan).decode(), "Apples."])
    response = await listed_only.post(
        "/v1/chat/completions",
        json=_chat(
            "fake-model",
            attachments=[{"attachment_id": stored["id"]}],
            context={"planning": "always", "max_input_tokens": 6000},
        ),
    )
    assert response.status_code == 200, response.text
    utilization = response.json()["context_utilization"]
    assert utilization["llm_planning_used"] is True, utilization["notes"]
    assert any(
        "planner model 'gpt-4o-mini' has no route" in note and "'fake-model'" in note
        for note in utilization["notes"]
    ), utilization["notes"]
    models = [request["body"]["model"] for request in fake_upstream.requests()]
    assert models == ["fake-model", "fake-model"]  # the planner call, then the answer


async def test_retried_errors_tell_the_sdk_not_to_retry_again(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
) -> None:
    client = await client_for(make_settings(max_retries=1, retry_backoff_s=0.01))
    fake_upstream.faults("*", [{"status": 503}] * 2)
    response = await client.post("/v1/chat/completions", json=_chat("gpt-4o-mini"))
    assert response.status_code == 502, response.text
    assert response.headers["x-should-retry"] == "false"
    assert fake_upstream.stats()["calls"] == 2

    once = await client_for(make_settings(max_retries=0))
    fake_upstream.faults("*", [{"status": 503}])
    response = await once.post("/v1/chat/completions", json=_chat("gpt-4o-mini"))
    assert response.status_code == 502
    assert "x-should-retry" not in response.headers  # not retried here: the SDK may


async def test_unroutable_embedding_model_falls_back_to_the_embedded_embedder(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    from app.embedders.embedded import EmbeddedEmbedder

    config = fake_model_list(tmp_path, fake_upstream, names=("fake-model",))
    settings = make_settings(upstream_base_url=None, config=config, embedding_model="nope-embed")
    client = await client_for(settings)
    state = client._transport.app.state.contextgate  # type: ignore[attr-defined]
    assert state.helpers.embedding is None
    assert isinstance(state.embedder, EmbeddedEmbedder)
    response = await client.post("/v1/chat/completions", json=_chat("fake-model"))
    assert response.status_code == 200, response.text
    notes = response.json()["context_utilization"]["notes"]
    assert "embedding model 'nope-embed' has no route here; the embedded embedder used instead" in (
        notes
    )


async def test_unroutable_summarizer_falls_back_to_the_request_model_warned_once(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The summarizer (default gpt-4o-mini) has no route in a model_list without it: the
    artifact summary is asked of the request's own model, every answer says so in its notes,
    and the start-up warning is logged once, not once per request."""
    caplog.set_level(logging.WARNING, logger="app.llm.reach")
    config = fake_model_list(tmp_path, fake_upstream, names=("fake-model", "local"))
    client = await client_for(make_settings(upstream_base_url=None, config=config))
    stored = (await client.post("/v1/attachments", json={"content": DOC})).json()
    decision = {
        "artifact_id": stored["id"],
        "strategy": "summarize",
        "priority": 1,
        "summarization_focus": "what grows",
    }
    plan = {"artifacts": [decision], "reasoning": "too long: summarize it"}
    fake_upstream.script(
        "fake-model", [orjson.dumps(plan).decode(), "Apples grow in every row.", "Apples."]
    )
    response = await client.post(
        "/v1/chat/completions",
        json=_chat(
            "fake-model",
            attachments=[{"attachment_id": stored["id"]}],
            context={"planning": "always", "max_input_tokens": 6000},
        ),
    )
    assert response.status_code == 200, response.text
    utilization = response.json()["context_utilization"]
    [artifact] = utilization["artifacts_processed"]
    assert artifact["strategy"] == "summarize", utilization
    assert utilization["planning_usage"]["summarizer_calls"] == 1, utilization
    fallback = "summarizer model 'gpt-4o-mini' has no route here; 'fake-model' used instead"
    assert fallback in utilization["notes"], utilization["notes"]
    calls = [request["body"] for request in fake_upstream.requests()]
    assert [body["model"] for body in calls] == ["fake-model"] * 3
    # the planner, the summary (its system prompt and the document), then the answer
    summary = calls[1]["messages"]
    assert str(summary[0]["content"]).startswith("You summarize a document"), summary
    assert "Section 3: the orchard" in orjson.dumps(summary).decode()
    for _ in range(2):  # later requests say it again; the log does not
        again = await client.post("/v1/chat/completions", json=_chat("local"))
        assert again.status_code == 200, again.text
        assert (
            fallback.replace("'fake-model'", "'local'")
            in again.json()["context_utilization"]["notes"]
        )
    warnings = [
        record
        for record in caplog.records
        if record.name == "app.llm.reach" and record.getMessage().startswith("summarizer model")
    ]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    [warning] = warnings
    assert warning.levelno == logging.WARNING
    assert warning.model == "gpt-4o-mini"  # type: ignore[attr-defined]
    assert "CONTEXTGATE_SUMMARIZER_MODEL" in warning.fix  # type: ignore[attr-defined]
