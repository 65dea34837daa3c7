"""Timestamps in API output: always with a zone (UTC), ISO-8601 such as
``2026-11-23T15:20:00.123456Z``.

SQLite returns stored datetimes without their zone; every stored time is UTC, so a naive one is
read as UTC. Use ``UtcDatetime`` for every datetime field of a response schema.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, PlainSerializer, WithJsonSchema

__all__ = ["UtcDatetime", "as_utc", "iso_utc"]


def as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso_utc(value: datetime) -> str:
    return as_utc(value).isoformat().replace("+00:00", "Z")


def _validate(value: object) -> object:
    return as_utc(value) if isinstance(value, datetime) else value


UtcDatetime = Annotated[
    datetime,
    AfterValidator(_validate),
    PlainSerializer(iso_utc, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
