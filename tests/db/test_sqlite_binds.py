"""The inline runner's bind processors (app/db/sqlite_binds.py) give exactly what SQLAlchemy's
own give, for the values the hot path binds and for edge values; other types keep theirs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import JSON, Boolean, DateTime, Integer, String, null
from sqlalchemy.dialects.sqlite import DATETIME
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

from app.core.database import create_database
from app.db.models.base import utcnow
from app.db.sqlite_binds import bind_processor


@pytest.fixture(scope="module")
def dialect() -> Dialect:
    """The SQLite dialect as the app configures it (orjson serializer)."""
    return create_database("sqlite+aiosqlite:///:memory:").engine.sync_engine.dialect


def _both(type_: TypeEngine[Any], dialect: Dialect) -> tuple[Callable[[Any], Any], Any]:
    processor = type_._cached_bind_processor(dialect)
    assert processor is not None
    return processor, bind_processor(type_, dialect, processor)


class _Later(datetime):
    """A datetime subclass: left to SQLAlchemy's processor."""


_DATETIMES = [
    utcnow(),
    utcnow().replace(microsecond=0),
    datetime(2026, 1, 2, 3, 4, 5, 6),
    datetime(2026, 1, 2, 3, 4, 5),
    datetime(2026, 6, 1, 12, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone(timedelta(hours=-3, seconds=7))),
    datetime(1, 1, 1),
    datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999),
    _Later(2026, 1, 2, 3, 4, 5, 600000),
    date(2026, 1, 2),
    None,
]


@pytest.mark.parametrize("type_", [DateTime(timezone=True), DateTime()])
def test_datetimes_are_written_as_sqlalchemy_writes_them(
    dialect: Dialect, type_: TypeEngine[Any]
) -> None:
    processor, shortcut = _both(type_, dialect)
    assert shortcut is not processor
    for value in _DATETIMES:
        assert shortcut(value) == processor(value), value
    for wrong in ("2026-01-02", 5):
        with pytest.raises(TypeError):
            shortcut(wrong)


def test_another_storage_format_keeps_its_processor(dialect: Dialect) -> None:
    type_ = DATETIME(storage_format="%(year)04d/%(month)02d/%(day)02d")
    processor = type_._cached_bind_processor(dialect)
    assert bind_processor(type_, dialect, processor) is processor
    truncated = DATETIME(truncate_microseconds=True)
    processor = truncated._cached_bind_processor(dialect)
    assert bind_processor(truncated, dialect, processor) is processor


_JSON_VALUES: list[object] = [
    {"tokens_used": 5, "notes": ["a", "é"], "nested": {"x": [1, 2.5, None, True]}},
    [{"type": "text", "text": "out"}],
    [],
    {},
    "héllo",
    "",
    0,
    -3,
    2**70,  # past orjson's 64 bits: the serializer's json fallback
    1.5,
    True,
    False,
    None,
    JSON.NULL,
    null(),
]


def test_json_is_written_as_sqlalchemy_writes_it(dialect: Dialect) -> None:
    processor, shortcut = _both(JSON(), dialect)
    assert shortcut is not processor
    for value in _JSON_VALUES:
        assert shortcut(value) == processor(value), value
    assert shortcut(None) == "null"  # JSON's NULL, not SQL's: none_as_null is off


def test_none_as_null_and_other_types_keep_their_processor(dialect: Dialect) -> None:
    for type_ in (JSON(none_as_null=True), Boolean(), String(20), Integer()):
        processor = type_._cached_bind_processor(dialect)
        assert bind_processor(type_, dialect, processor) is processor
    assert bind_processor(DateTime(), dialect, None) is None
