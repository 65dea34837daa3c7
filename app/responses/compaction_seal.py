"""The sealed ``encrypted_content`` of a ``compaction`` item contextgate hands out.

A compaction item names a stored conversation and how far it was compacted. The client holds it
and sends it back; contextgate must trust it no further than it issued it. So it is sealed:
an HMAC-SHA256 over the payload and the caller's tenant, keyed by a secret derived from the
settings (``secret_key``, else the master key, else the database URL). A forged or altered
item, one issued to another tenant, or another provider's item is refused with a 400.

The payload (conversation id and length) is not secret from the caller who owns it; the tenant
is never written into it, only into the MAC.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

import orjson

from app.core.errors import BadRequest
from app.core.settings import Settings

__all__ = ["SealedCompaction", "open_seal", "seal"]

_PREFIX = "cgc1."
_LABEL = b"contextgate/responses/compaction/v1"


@dataclass(frozen=True, slots=True)
class SealedCompaction:
    """What a compaction item stands for: the conversation, compacted with ``upto`` messages."""

    conversation_id: str
    upto: int


def _key(settings: Settings) -> bytes:
    secret = settings.secret_key or settings.master_key
    material = secret.get_secret_value() if secret is not None else settings.database_url
    return hmac.new(material.encode(), _LABEL, hashlib.sha256).digest()


def _mac(settings: Settings, tenant_id: str, payload: bytes) -> bytes:
    message = tenant_id.encode() + b"\x00" + payload
    return hmac.new(_key(settings), message, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(settings: Settings, tenant_id: str, sealed: SealedCompaction) -> str:
    payload = orjson.dumps({"c": sealed.conversation_id, "n": sealed.upto})
    return _PREFIX + _b64(payload) + "." + _b64(_mac(settings, tenant_id, payload))


def _refused(param: str) -> BadRequest:
    return BadRequest(
        "This compaction item was not issued by contextgate for this caller (forged, altered, "
        "another key's or another provider's); send the history it replaced instead.",
        param=param,
        code="invalid_compaction_item",
    )


def open_seal(settings: Settings, tenant_id: str, content: str, param: str) -> SealedCompaction:
    """The sealed compaction, or a 400 (``param`` names the item) when it is not ours."""
    if not content.startswith(_PREFIX) or content.count(".") != 2:
        raise _refused(param)
    body, mac = content[len(_PREFIX) :].split(".")
    try:
        payload, presented = _unb64(body), _unb64(mac)
    except (binascii.Error, ValueError):
        raise _refused(param) from None
    if not hmac.compare_digest(presented, _mac(settings, tenant_id, payload)):
        raise _refused(param)
    data = orjson.loads(payload)
    return SealedCompaction(conversation_id=str(data["c"]), upto=int(data["n"]))
