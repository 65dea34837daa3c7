"""HTTP surface: POST /v1/embeddings (key limits as on chat: rpm and budget)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from app.core.jsonresponse import json_response
from app.core.state import AppState, get_state
from app.embeddings.schemas import EmbeddingsRequest
from app.embeddings.service import create_embeddings
from app.keys.auth import CallerDep
from app.keys.limits import Reservation
from app.keys.wiring import get_key_limits

router = APIRouter(tags=["embeddings"])

StateDep = Annotated[AppState, Depends(get_state)]


@router.post("/v1/embeddings", response_model=None)
async def embeddings(
    body: EmbeddingsRequest, request: Request, caller: CallerDep, state: StateDep
) -> Response:
    limits = get_key_limits(request)
    reservation = await limits.admit(caller) if limits is not None else Reservation()
    try:
        return json_response(await create_embeddings(state, caller, body))
    finally:
        await reservation.release()
