"""HTTP surface: POST /v1/embeddings (key limits as on chat: rpm by CallerDep, budget here)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from app.core.jsonresponse import json_response
from app.embeddings.schemas import EmbeddingsRequest
from app.embeddings.service import create_embeddings
from app.keys.auth import CallerDep
from app.state import StateDep

router = APIRouter(tags=["embeddings"])


@router.post("/v1/embeddings", response_model=None)
async def embeddings(body: EmbeddingsRequest, caller: CallerDep, state: StateDep) -> Response:
    reservation = await state.limits.admit(caller)
    try:
        answer = await create_embeddings(state.llm, state.database, caller, body)
        return json_response(answer)
    finally:
        await reservation.release()
