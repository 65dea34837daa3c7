"""Embeddings: one routed upstream call, a request-log row (key budgets count it), metrics."""

from __future__ import annotations

import base64
import struct
import time
from typing import cast

from app.core import metrics
from app.core.database import Database
from app.core.errors import BadRequest
from app.db.models import new_id
from app.embeddings.schemas import EmbeddingsRequest
from app.keys.caller import Caller
from app.llm.client import LLMClient
from app.turns.repository import request_log_repository
from app.wire.embeddings import EmbeddingsResponse

__all__ = ["create_embeddings"]


def _base64(vector: list[float]) -> str:
    """What OpenAI sends for ``encoding_format: base64``: little-endian float32 bytes."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


async def create_embeddings(
    llm: LLMClient, database: Database, caller: Caller, request: EmbeddingsRequest
) -> EmbeddingsResponse:
    if not request.has_input():
        raise BadRequest("'input' must not be empty.", param="input", code="invalid_input")
    started = time.perf_counter()
    params = request.model_dump(include={"dimensions", "user"}, exclude_none=True)
    response, cost = await llm.embeddings(request.model, request.input, params)
    tokens = int(response["usage"]["prompt_tokens"])
    async with database.writing() as session:
        await request_log_repository.insert(
            session,
            {
                "id": new_id("req"),
                "tenant_id": caller.tenant_id,
                "key_id": caller.key_id,
                "model": request.model,
                "status": "ok",
                "status_code": 200,
                "prompt_tokens": tokens,
                "prompt_cost": cost,
                "total_cost": cost,
                "latency_ms": round((time.perf_counter() - started) * 1000, 2),
            },
        )
    metrics.record_embeddings(request.model, tokens, cost)
    if request.encoding_format == "base64":
        for item in response["data"]:
            item["embedding"] = _base64(cast("list[float]", item["embedding"]))  # floats so far
    return response
