"""``Idempotency-Key`` for POST /v1/chat/completions, scoped per tenant.

The first request with a key claims it (a ``pending`` row); when it succeeds its answer (JSON,
or the whole SSE stream) is stored and a replay returns it without calling upstream. A
duplicate that arrives while the first is still running gets 409; the same key with another
body gets 400. A failed request releases its key so that the client can retry. A claim older
than the request timeout (its process died) can be taken over.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import orjson
from sqlalchemy.exc import IntegrityError
from starlette.responses import Response

from app.core.database import Database
from app.core.errors import BadRequest, Conflict
from app.db.models import IdempotencyRecord
from app.turns.repository import idempotency_repository as repository

__all__ = ["IdempotentRequest", "claim", "request_fingerprint"]

MAX_KEY_LENGTH = 255
_REPLAYED_HEADERS = ("x-conversation-id", "cache-control")


def request_fingerprint(payload: Mapping[str, object]) -> str:
    try:
        canonical = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # integers beyond 64 bits: the standard library copes
        canonical = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(canonical).hexdigest()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class IdempotentRequest:
    """A claimed key: finish() stores the answer, abandon() frees the key."""

    def __init__(self, database: Database, tenant_id: str, key: str) -> None:
        self._database, self.tenant_id, self.key = database, tenant_id, key
        self._open = True

    async def finish(
        self, status_code: int, media_type: str, headers: dict[str, str], body: bytes
    ) -> None:
        if not self._open:
            return
        self._open = False
        async with self._database.writing() as session:
            row = await repository.by_key(session, self.tenant_id, self.key)
            if row is None:  # taken over and finished elsewhere: nothing to store
                return
            row.status = "done"
            row.status_code = status_code
            row.media_type = media_type
            row.headers = {
                k: v
                for k, v in headers.items()
                if k.lower() in _REPLAYED_HEADERS or k.lower().startswith("x-contextgate-")
            }
            row.body = body

    async def abandon(self) -> None:
        if not self._open:
            return
        self._open = False
        async with self._database.writing() as session:
            await repository.delete_pending(session, self.tenant_id, self.key)


async def claim(
    database: Database,
    tenant_id: str,
    key: str,
    fingerprint: str,
    *,
    stale_after_s: float,
) -> IdempotentRequest | Response:
    """Claim ``key`` for this request, or the stored answer of an earlier one (a replay)."""
    if not key or len(key) > MAX_KEY_LENGTH:
        raise BadRequest(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters.",
            param="Idempotency-Key",
            code="invalid_idempotency_key",
        )
    now = datetime.now(UTC)
    try:
        async with database.writing() as session:
            row = await repository.by_key(session, tenant_id, key, for_update=True)
            if row is not None:
                if row.request_hash != fingerprint:
                    raise BadRequest(
                        "This Idempotency-Key was used with a different request body.",
                        param="Idempotency-Key",
                        code="idempotency_key_reused",
                    )
                if row.status == "done":
                    headers = dict(row.headers or {})
                    headers["Idempotent-Replayed"] = "true"
                    return Response(
                        row.body or b"",
                        status_code=row.status_code or 200,
                        media_type=row.media_type,
                        headers=headers,
                    )
                if _aware(row.created_at) > now - timedelta(seconds=stale_after_s):
                    raise Conflict(
                        "A request with this Idempotency-Key is still in progress.",
                        param="Idempotency-Key",
                        code="idempotency_key_in_use",
                    )
                row.created_at = now  # its process died: take the claim over
            else:
                await repository.add(
                    session,
                    IdempotencyRecord(
                        tenant_id=tenant_id,
                        idempotency_key=key,
                        request_hash=fingerprint,
                        status="pending",
                        created_at=now,
                    ),
                )
    except IntegrityError:
        raise Conflict(
            "A request with this Idempotency-Key is still in progress.",
            param="Idempotency-Key",
            code="idempotency_key_in_use",
        ) from None
    return IdempotentRequest(database, tenant_id, key)
