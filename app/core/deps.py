"""The dependencies every router uses, as ``Annotated`` aliases (one place, no copies).

- ``StateDep``: the application's long-lived parts (``AppState``), built at start-up.
- ``CallerDep``: the authenticated caller (tenant). It also throttles failed authentication
  per client address and counts the request against the key's rpm limit, so every endpoint
  that takes it is limited once per request.
- ``KeyServiceDep``: the virtual-key service (400 without a master key).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.core.errors import BadRequest
from app.core.state import AppState, get_state
from app.keys.auth import Caller, get_caller
from app.keys.service import KeyService

__all__ = ["CallerDep", "KeyServiceDep", "StateDep", "get_key_service"]

StateDep = Annotated[AppState, Depends(get_state)]
CallerDep = Annotated[Caller, Depends(get_caller)]


async def get_key_service(state: StateDep) -> KeyService:
    if state.keys is None:
        raise BadRequest(
            "Virtual keys need CONTEXTGATE_MASTER_KEY to be set.", code="master_key_required"
        )
    return state.keys


KeyServiceDep = Annotated[KeyService, Depends(get_key_service)]
