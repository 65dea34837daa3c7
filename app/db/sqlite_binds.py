"""SQLAlchemy's bind processors for the inline runner (app/db/sqlite_core.py), with a shortcut
for the values two of them turn into text the same way every time.

SQLite's ``DATETIME`` processor formats a ``datetime`` through a ``%`` format and a dict of its
seven fields (~4 µs here); ``datetime.isoformat(" ", "microseconds")`` writes the same text in
C for every ``datetime``: a four-digit year, the microseconds always, and the UTC offset of an
aware value after them, which SQLite's format leaves out (hence the first 26 characters). The
``JSON`` processor checks for SQLAlchemy's NULL markers before calling the serializer; the
values a request stores (dicts, lists, strings, numbers, booleans, None) go straight to it.
Anything else, a processor a type overrides, or another storage format: SQLAlchemy's processor.
``tests/db/test_sqlite_binds.py`` compares both on the values that occur and on edge values.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.dialects.sqlite import DATETIME
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import sqltypes
from sqlalchemy.types import TypeEngine

__all__ = ["bind_processor"]

Processor = Callable[[Any], Any]

_DATETIME_FORMAT = DATETIME._storage_format
_DATETIME_BIND = DATETIME.bind_processor
_JSON_BIND = sqltypes.JSON.bind_processor
# What JSON's processor hands the serializer as it is (None too, unless ``none_as_null``).
_PLAIN_JSON = frozenset({dict, list, str, int, float, bool, type(None)})


def bind_processor(
    type_: TypeEngine[Any], dialect: Dialect, processor: Processor | None
) -> Processor | None:
    """``processor`` (the type's bind processor on ``dialect``), or an equivalent shortcut."""
    if processor is None:
        return None
    impl = type_.dialect_impl(dialect)
    if (
        isinstance(impl, DATETIME)
        and type(impl).bind_processor is _DATETIME_BIND
        and impl._storage_format == _DATETIME_FORMAT
    ):
        return _datetime_text(processor)
    serialize = dialect._json_serializer  # type: ignore[attr-defined]
    if (
        isinstance(impl, sqltypes.JSON)
        and type(impl).bind_processor is _JSON_BIND
        and not impl.none_as_null
        and serialize is not None
        and impl._str_impl.bind_processor(dialect) is None
    ):
        return _json_text(serialize, processor)
    return processor


def _datetime_text(processor: Processor) -> Processor:
    def process(value: object) -> object:
        if type(value) is datetime:
            return value.isoformat(" ", "microseconds")[:26]
        return processor(value)

    return process


def _json_text(serialize: Callable[[Any], str], processor: Processor) -> Processor:
    plain = _PLAIN_JSON

    def process(value: object) -> object:
        if type(value) in plain:
            return serialize(value)
        return processor(value)

    return process
