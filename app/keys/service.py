"""Virtual keys: issue (shown once), list, revoke, and resolve a presented key to its caller."""

from __future__ import annotations

from datetime import UTC, datetime

from app.core.database import Database
from app.core.errors import ContextGateError, NotFound, Unauthorized
from app.core.timestamps import as_utc, iso_utc
from app.db.models import ApiKey, new_id
from app.keys.caller import Caller
from app.keys.hashing import display_prefix, generate_key, hash_key, pepper_from
from app.keys.repository import key_repository
from app.keys.schemas import KeyCreate, KeyCreated, KeyInfo

__all__ = ["Forbidden", "KeyService", "require_admin"]


class Forbidden(ContextGateError):
    status_code = 403
    error_type = "invalid_request_error"
    default_code = "forbidden"


def require_admin(caller: Caller) -> None:
    if not caller.is_admin:
        raise Forbidden("Only the master key can manage keys.")


def _info(key: ApiKey, spend: float = 0.0) -> KeyInfo:
    return KeyInfo(
        id=key.id,
        name=key.name,
        key_prefix=key.key_prefix,
        max_budget=key.max_budget,
        rpm_limit=key.rpm_limit,
        created_at=key.created_at,
        expires_at=key.expires_at,
        spend=spend,
    )


class KeyService:
    def __init__(self, database: Database, master_key: str) -> None:
        self._database = database
        self._pepper = pepper_from(master_key)

    async def create(self, body: KeyCreate) -> KeyCreated:
        secret = generate_key()
        key_id = new_id("key")
        row = ApiKey(
            id=key_id,
            key_hash=hash_key(secret, self._pepper),
            key_prefix=display_prefix(secret),
            name=body.name,
            tenant_id=key_id,  # every key is its own tenant
            max_budget=body.max_budget,
            rpm_limit=body.rpm_limit,
            created_at=datetime.now(UTC),
            expires_at=body.expires_at,
        )
        async with self._database.writing() as session:
            await key_repository.add(session, row)
        return KeyCreated(**_info(row).model_dump(), key=secret)

    async def list(self) -> list[KeyInfo]:
        async with self._database.reading() as session:
            keys = await key_repository.list_active(session)
            spends = await key_repository.spends(session, keys)
        return [_info(key, spends.get(key.id, 0.0)) for key in keys]

    async def revoke(self, key_id: str) -> None:
        async with self._database.writing() as session:
            key = await key_repository.get(session, key_id)
            if key is None:
                raise NotFound(f"No key with id '{key_id}'.", param="id")
            key.revoked_at = datetime.now(UTC)

    async def resolve(self, presented: str) -> Caller | None:
        """The caller a presented key stands for; None when it is unknown or revoked, 401
        ``expired_api_key`` when it has expired."""
        async with self._database.reading() as session:
            key = await key_repository.by_hash(session, hash_key(presented, self._pepper))
        if key is None:
            return None
        if key.expires_at is not None and as_utc(key.expires_at) <= datetime.now(UTC):
            raise Unauthorized(
                f"This API key expired at {iso_utc(key.expires_at)}.", code="expired_api_key"
            )
        return Caller(
            tenant_id=key.tenant_id,
            key_id=key.id,
            is_admin=False,
            rpm_limit=key.rpm_limit,
            max_budget=key.max_budget,
        )
