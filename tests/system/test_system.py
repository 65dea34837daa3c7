"""app/system's routes in-process: liveness, readiness, the Prometheus scrape (open, as /health
is) and /v1/models (the configured names first, then each name the upstream lists that is not
among them; an upstream that cannot list adds nothing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from app.core.settings import Settings
from tests.fake_upstream import FakeUpstream
from tests.support.models import fake_model_list
from tests.support.proxy import free_port

MASTER = "sk-master-system-test"
CONFIGURED = ("local-a", "fake-model")


async def test_health_and_ready_on_a_reachable_database(client: httpx.AsyncClient) -> None:
    health = await client.get("/health")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    head = await client.head("/health")
    assert (head.status_code, head.content) == (200, b"")
    ready = await client.get("/ready")
    assert (ready.status_code, ready.json()) == (200, {"status": "ok", "database": "ok"})


async def test_probes_and_metrics_are_open_the_model_list_is_not(
    client_for: Callable[[Settings], Any], make_settings: Callable[..., Settings]
) -> None:
    client: httpx.AsyncClient = await client_for(make_settings(master_key=MASTER))
    assert (await client.get("/health")).status_code == 200
    assert (await client.get("/ready")).status_code == 200
    scrape = await client.get("/metrics")
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain")
    assert "# TYPE" in scrape.text
    assert (await client.get("/v1/models")).status_code == 401
    listed = await client.get("/v1/models", headers={"Authorization": f"Bearer {MASTER}"})
    assert listed.status_code == 200


async def test_models_are_the_configured_names_then_the_upstreams_each_once(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    config = fake_model_list(tmp_path, fake_upstream, names=CONFIGURED)
    client: httpx.AsyncClient = await client_for(make_settings(config=str(config)))
    upstream = [m["id"] for m in httpx.get(f"{fake_upstream.base_url}/models").json()["data"]]
    assert "fake-model" in upstream  # a name both configured and listed upstream
    response = await client.get("/v1/models")
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "list"
    names = [model["id"] for model in body["data"]]
    assert names == [*CONFIGURED, *(name for name in upstream if name not in CONFIGURED)]
    for model in body["data"]:
        assert (model["object"], model["owned_by"]) == ("model", "contextgate")
        assert isinstance(model["created"], int)


async def test_an_upstream_that_cannot_list_adds_no_names(
    client_for: Callable[[Settings], Any],
    make_settings: Callable[..., Settings],
    fake_upstream: FakeUpstream,
    tmp_path: Path,
) -> None:
    config = fake_model_list(tmp_path, fake_upstream, names=CONFIGURED)
    closed = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    settings = make_settings(config=str(config), upstream_base_url=closed)
    client: httpx.AsyncClient = await client_for(settings)
    response = await client.get("/v1/models")
    assert response.status_code == 200
    assert [model["id"] for model in response.json()["data"]] == list(CONFIGURED)
