"""POST/GET /v1/keys and DELETE /v1/keys/{id}: the master key manages virtual keys."""

from __future__ import annotations

from fastapi import APIRouter

from app.keys.auth import CallerDep, KeyServiceDep
from app.keys.schemas import KeyCreate, KeyCreated, KeyDeleted, KeyList
from app.keys.service import require_admin

router = APIRouter(prefix="/v1/keys", tags=["keys"])


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
