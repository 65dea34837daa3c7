"""GET /health, GET /ready and GET /v1/models."""

from __future__ import annotations

import time
from typing import Any

import httpx
from fastapi import APIRouter
from fastapi.responses import Response

from app.core import metrics
from app.core.jsonresponse import json_response
from app.keys.auth import CallerDep
from app.llm.routing import ModelRouter
from app.state import StateDep

router = APIRouter(tags=["system"])


@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


# HEAD apart and out of the schema: one route with both methods gives two operations the
# same operationId in /openapi.json.
router.head("/health", include_in_schema=False)(health)


@router.get("/ready", response_model=None)
async def ready(state: StateDep) -> Response:
    try:
        await state.database.ping()
    except Exception as exc:
        return json_response(
            {"status": "unavailable", "database": f"unreachable: {exc.__class__.__name__}"},
            status_code=503,
        )
    return json_response({"status": "ok", "database": "ok"})


@router.get("/metrics", include_in_schema=False)
async def prometheus_metrics() -> Response:
    """Prometheus text format; open like /health (counts and latencies, no content or keys)."""
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE_LATEST)


async def _upstream_models(router: ModelRouter) -> list[str]:
    """Names the OpenAI-compatible upstream serves; none if it cannot say."""
    if not router.upstream_base_url:
        return []
    headers = {}
    if router.upstream_api_key:
        headers["Authorization"] = f"Bearer {router.upstream_api_key}"
    try:
        async with httpx.AsyncClient(timeout=5.0) as client:
            response = await client.get(f"{router.upstream_base_url}/models", headers=headers)
            response.raise_for_status()
            return [str(item["id"]) for item in response.json().get("data", []) if "id" in item]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return []


@router.get("/v1/models")
async def list_models(_: CallerDep, state: StateDep) -> dict[str, Any]:
    router = state.llm.router
    names = router.configured_names()
    for name in await _upstream_models(router):
        if name not in names:
            names.append(name)
    created = int(time.time())
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "contextgate"}
            for name in names
        ],
    }
