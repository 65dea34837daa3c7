"""POST/GET /v1/keys and DELETE /v1/keys/{id}: the master key manages virtual keys."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from app.core.errors import BadRequest
from app.keys.auth import CallerDep
from app.keys.schemas import KeyCreate, KeyCreated, KeyDeleted, KeyList
from app.keys.service import KeyService, require_admin

router = APIRouter(prefix="/v1/keys", tags=["keys"])


async def get_key_service(request: Request) -> KeyService:
    service: KeyService | None = getattr(request.app.state, "key_service", None)
    if service is None:
        raise BadRequest(
            "Virtual keys need CONTEXTGATE_MASTER_KEY to be set.", code="master_key_required"
        )
    return service


KeyServiceDep = Annotated[KeyService, Depends(get_key_service)]


@router.post("", response_model=KeyCreated, status_code=201)
async def create_key(body: KeyCreate, caller: CallerDep, keys: KeyServiceDep) -> KeyCreated:
    require_admin(caller)
    return await keys.create(body)


@router.get("", response_model=KeyList)
async def list_keys(caller: CallerDep, keys: KeyServiceDep) -> KeyList:
    require_admin(caller)
    return KeyList(data=await keys.list())


@router.delete("/{key_id}", response_model=KeyDeleted)
async def delete_key(key_id: str, caller: CallerDep, keys: KeyServiceDep) -> KeyDeleted:
    require_admin(caller)
    await keys.revoke(key_id)
    return KeyDeleted(id=key_id)
