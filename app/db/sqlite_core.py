"""The hot path's Core statements, run straight on SQLite's own connection.

A chat turn runs five Core statements (app/db/repository.py ``execute_core``). Through
SQLAlchemy each costs ~40 µs beyond what SQLite takes (~2 µs): a greenlet trip, a cache-key
walk, an execution context, parameter construction, a cursor result (measured in bench/README.md,
"Speed and scale"). On SQLite the session's connection is a ``sqlite3`` connection on the
event loop's thread (app/core/sqlite_driver.py), so these statements can skip that layer while
staying SQLAlchemy's: each is compiled once per parameter shape by SQLAlchemy itself, its
parameters converted by SQLAlchemy's own bind processors (JSON, dates, booleans), its Python
column defaults filled as SQLAlchemy fills them, its rows converted by SQLAlchemy's result
processors, inside the session's open transaction. A statement this does not cover (RETURNING,
an expanding ``IN``, a default it cannot compute, no transaction begun yet) goes through
SQLAlchemy as before, and so does every statement on PostgreSQL.

``before_cursor_execute`` listeners on the engine still see every statement (statement counts
in tests and in bench/assembly.py); an error comes out as SQLAlchemy's exception for it, and a
database still locked after the busy timeout as ``DatabaseUnavailable``, as through the engine.
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

from app.core.errors import DatabaseUnavailable
from app.core.sqlite_driver import InlineConnection, is_busy
from app.core.sqlite_lanes import lane_of
from app.db.sqlite_binds import bind_processor

__all__ = ["InlineResult", "run_inline"]

Parameters = Mapping[str, object] | Sequence[Mapping[str, object]] | None

_MAX_PLANS = 256  # hot statements are module constants or small lru_caches: a few dozen shapes


class _Unsupported(Exception):
    """The statement needs SQLAlchemy's execution layer."""


_Bind = Callable[[Mapping[str, object]], object]


@dataclass(frozen=True, slots=True)
class _Plan:
    """A statement compiled for SQLite: its SQL, how to bind one row of parameters, and how
    to turn a fetched row into the row SQLAlchemy would have returned."""

    sql: str
    binds: tuple[_Bind, ...]
    row_type: type[tuple[Any, ...]] | None  # None: no rows
    result_processors: tuple[Callable[[Any], Any] | None, ...]
    # A row with the keys the plan was made for (the hot path's usual case): the given values
    # taken in one C call (with ``width`` keys, any key the statement does not bind last),
    # the column defaults inserted at their positions, then the type processors at theirs;
    # else ``binds``, one by one, each looking for its value or its default.
    given: Callable[[Mapping[str, object]], tuple[object, ...]] | None = None
    width: int = 0
    bound: int = 0  # how many of the values taken are bound
    defaults: tuple[tuple[int, Callable[[], object]], ...] = ()
    converted: tuple[tuple[int, Callable[[Any], Any]], ...] = ()

    def parameters(self, row: Mapping[str, object]) -> tuple[object, ...]:
        if self.given is not None and len(row) == self.width:
            try:
                values = self.given(row)
            except KeyError:
                pass
            else:
                if len(values) > self.bound:
                    values = values[: self.bound]
                if not self.converted and not self.defaults:
                    return values
                converted = list(values)
                for index, default in self.defaults:
                    converted.insert(index, default())
                for index, process in self.converted:
                    converted[index] = process(converted[index])
                return tuple(converted)
        return tuple(bind(row) for bind in self.binds)

    def rows(self, fetched: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        assert self.row_type is not None
        make = self.row_type._make  # type: ignore[attr-defined]
        processors = self.result_processors
        if not any(processors):
            return [make(row) for row in fetched]
        return [
            make(
                [value if p is None else p(value) for p, value in zip(processors, row, strict=True)]
            )
            for row in fetched
        ]


class InlineResult:
    """What the hot path reads of a result: its rows (tuples with the columns' names as
    attributes, as SQLAlchemy's rows have) and the rows a DML statement matched."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def all(self) -> list[tuple[Any, ...]]:
        return self._rows


_plans: dict[tuple[Executable, frozenset[str], tuple[int, ...]], _Plan | None] = {}
_expanding: dict[Executable, tuple[str, ...]] = {}


async def run_inline(
    session: AsyncSession, statement: Executable, parameters: Parameters
) -> InlineResult | None:
    """``statement`` run on the session's SQLite connection, or None when it must go through
    SQLAlchemy (not SQLite, no connection checked out yet, a shape this does not cover)."""
    lane = lane_of(session)
    if lane is not None:
        connection, driver = lane.sync_connection, lane.driver
    else:
        opened = _open_connection(session)
        if opened is None:
            return None
        connection, found = opened, opened.connection.driver_connection
        if not isinstance(found, InlineConnection):
            return None
        driver = found
    rows = [parameters] if parameters is None or isinstance(parameters, Mapping) else parameters
    if not rows:
        return None
    first: Mapping[str, object] = rows[0] or {}
    plan = _plan_for(statement, connection.dialect, first)
    if plan is None:
        return None
    bound = [plan.parameters(row or {}) for row in rows]
    many = len(bound) > 1
    listeners = connection.dispatch.before_cursor_execute
    if listeners:
        for listener in listeners:
            listener(connection, None, plan.sql, bound if many else bound[0], None, many)
    try:
        fetched, rowcount = await driver._call(_execute, driver._conn, plan.sql, bound, many)
    except sqlite3.OperationalError as error:
        if is_busy(error):
            raise DatabaseUnavailable() from error
        raise _wrapped(plan.sql, bound, error) from error
    except sqlite3.Error as error:
        raise _wrapped(plan.sql, bound, error) from error
    return InlineResult(plan.rows(fetched) if plan.row_type is not None else [], rowcount)


def _open_connection(session: AsyncSession) -> Connection | None:
    """The SQLAlchemy connection of a (non-lane) session's transaction, if one is checked out
    (taking one would need SQLAlchemy's greenlet: the BEGIN may wait for a busy database)."""
    transaction = session.sync_session.get_transaction()
    if transaction is None or session.bind is None:
        return None
    held = getattr(transaction, "_connections", {}).get(session.bind.sync_engine)
    if held is None:
        return None
    connection: Connection = held[0]
    return connection if connection.dialect.name == "sqlite" else None


def _execute(
    connection: sqlite3.Connection, sql: str, bound: list[tuple[object, ...]], many: bool
) -> tuple[list[tuple[Any, ...]], int]:
    cursor = connection.cursor()
    try:
        if many:
            cursor.executemany(sql, bound)
        else:
            cursor.execute(sql, bound[0])
        fetched = cursor.fetchall() if cursor.description else []
        return fetched, cursor.rowcount
    finally:
        cursor.close()


def _wrapped(sql: str, bound: list[tuple[object, ...]], error: sqlite3.Error) -> BaseException:
    """The exception SQLAlchemy raises for this driver error (IntegrityError, …)."""
    return sa_exc.DBAPIError.instance(sql, bound, error, sqlite3.Error)


def _plan_for(
    statement: Executable, dialect: Dialect, parameters: Mapping[str, object]
) -> _Plan | None:
    """The plan for this statement and parameter shape: which parameters are given, and the
    length of each list an expanding ``IN`` takes (its SQL has one ``?`` per element)."""
    expanding = _expanding.get(statement)
    if expanding is None:
        expanding = _expanding_names(statement, dialect)
    try:
        lengths = tuple(len(parameters[name]) for name in expanding)  # type: ignore[arg-type]
    except (KeyError, TypeError):
        return None
    key = (statement, frozenset(parameters), lengths)
    try:
        return _plans[key]
    except KeyError:
        pass
    try:
        plan: _Plan | None = _compile(statement, dialect, parameters)
    except _Unsupported:
        plan = None
    if len(_plans) >= _MAX_PLANS:
        _plans.clear()
        _expanding.clear()
    _plans[key] = plan
    return plan


def _expanding_names(statement: Executable, dialect: Dialect) -> tuple[str, ...]:
    """The statement's expanding parameters (learnt once, from its compiled form)."""
    names: tuple[str, ...] = ()
    if isinstance(statement, ClauseElement):
        compiled = statement.compile(dialect=dialect)
        if isinstance(compiled, SQLCompiler):  # else _compile finds it unsupported
            binds = compiled.binds.items()
            names = tuple(sorted(name for name, bind in binds if bind.expanding))
    _expanding[statement] = names
    return names


def _compile(statement: Executable, dialect: Dialect, parameters: Mapping[str, object]) -> _Plan:
    if not isinstance(statement, ClauseElement):
        raise _Unsupported
    compiled = statement.compile(dialect=dialect, column_keys=sorted(parameters))
    if not isinstance(compiled, SQLCompiler) or not compiled.positional:
        raise _Unsupported
    if compiled.effective_returning or compiled.positiontup is None:
        raise _Unsupported
    sql, names = str(compiled), tuple(compiled.positiontup)
    processors: Mapping[str, object] = compiled._bind_processors
    elements: dict[str, tuple[str, int]] = {}  # an expanded ``?``: (its list, its index)
    if any(bind.expanding for bind in compiled.binds.values()):
        expanded = compiled.construct_expanded_state(dict(parameters))
        if expanded.positiontup is None:
            raise _Unsupported
        sql, names = expanded.statement, tuple(expanded.positiontup)
        processors = expanded.processors
        for name, element_names in expanded.parameter_expansion.items():
            elements.update({element: (name, i) for i, element in enumerate(element_names)})
    defaults = _python_defaults(compiled)
    processor = {
        name: bind_processor(
            compiled.binds[elements[name][0] if name in elements else name].type,
            dialect,
            _processor(processors.get(name)),
        )
        for name in names
    }
    binds = tuple(
        _element(*elements[name], processor[name])
        if name in elements
        else _binder(name, _fallback(name, compiled, defaults), processor[name])
        for name in names
    )
    fast: dict[str, Any] = {}
    if not elements:
        fast = _fast_binding(names, parameters, compiled, processor, defaults)
    if compiled.isinsert or compiled.isupdate or compiled.isdelete:
        return _Plan(sql, binds, None, (), **fast)
    columns = compiled._result_columns
    keys = [column.keyname for column in columns]
    row_type = namedtuple("InlineRow", keys, rename=True)  # type: ignore[misc]  # noqa: PYI024
    result_processors = tuple(
        column.type._cached_result_processor(dialect, None) for column in columns
    )
    return _Plan(sql, binds, row_type, result_processors, **fast)


def _fast_binding(
    names: tuple[str, ...],
    parameters: Mapping[str, object],
    compiled: SQLCompiler,
    processor: Mapping[str, Callable[[Any], Any] | None],
    defaults: Mapping[str, Callable[[], object]],
) -> dict[str, Any]:
    """``_Plan``'s fields for binding a row with ``parameters``' keys in one call: the names
    given, in order, then the keys the statement does not bind; the fallbacks of the names not
    given (column defaults, the statement's own values) at their positions."""
    given = [name for name in names if name in parameters]
    unbound = sorted(set(parameters) - set(names))
    fills = tuple(
        (index, _fallback(name, compiled, defaults))
        for index, name in enumerate(names)
        if name not in parameters
    )
    converted = tuple(
        (index, process)
        for index, name in enumerate(names)
        if (process := processor[name]) is not None
    )
    return {
        "given": _getter((*given, *unbound)),
        "width": len(parameters),
        "bound": len(given),
        "defaults": fills,
        "converted": converted,
    }


def _getter(names: tuple[str, ...]) -> Callable[[Mapping[str, object]], tuple[object, ...]]:
    """``row``'s values of ``names``, in order, as a tuple (KeyError when one is missing)."""
    if len(names) > 1:
        return itemgetter(*names)
    if names:
        name = names[0]
        return lambda row: (row[name],)
    return lambda row: ()


def _python_defaults(compiled: SQLCompiler) -> dict[str, Callable[[], object]]:
    """The Python-side defaults SQLAlchemy computes before an INSERT or UPDATE ("prefetch")
    for the columns the parameters leave out: a scalar or a callable taking no argument."""
    defaults: dict[str, Callable[[], object]] = {}
    for column, default in [
        *((c, c.default) for c in compiled.insert_prefetch),
        *((c, c.onupdate) for c in compiled.update_prefetch),
    ]:
        if default is None:
            raise _Unsupported
        if default.is_scalar:
            defaults[column.key] = _constant(default.arg)  # type: ignore[attr-defined]
        elif default.is_callable:
            defaults[column.key] = _called(default.arg)  # type: ignore[attr-defined]
        else:
            raise _Unsupported
    return defaults


def _constant(value: object) -> Callable[[], object]:
    return lambda: value


def _called(function: Callable[[object], object]) -> Callable[[], object]:
    """A column default's callable, as SQLAlchemy wraps it: it takes an execution context,
    which a default of no arguments ignores (ours all do)."""
    return lambda: function(None)


def _processor(processor: object) -> Callable[[Any], Any] | None:
    if processor is None or callable(processor):
        return processor
    raise _Unsupported  # a tuple type's processors, one per element


def _element(name: str, index: int, processor: Callable[[Any], Any] | None) -> _Bind:
    """One element of an expanding parameter's list."""
    if processor is None:
        return lambda row: row[name][index]  # type: ignore[index]
    return lambda row: processor(row[name][index])  # type: ignore[index]


def _fallback(
    name: str, compiled: SQLCompiler, defaults: Mapping[str, Callable[[], object]]
) -> Callable[[], object]:
    """A parameter's value when the caller gives none: the column's default, else the bind's
    own value (a literal in the statement); a required one raises, as SQLAlchemy does."""
    bind = compiled.binds[name]
    if name in defaults:
        return defaults[name]
    if bind.callable is not None:
        return bind.callable
    if not bind.required:
        return _constant(bind.value)

    def required() -> object:
        raise sa_exc.InvalidRequestError(f"A value is required for bind parameter {name!r}")

    return required


def _binder(
    name: str, fallback: Callable[[], object], processor: Callable[[Any], Any] | None
) -> _Bind:
    """How one positional parameter is bound: the caller's value, else ``fallback()``, then
    the type's bind processor."""

    def given(row: Mapping[str, object]) -> object:
        return row[name] if name in row else fallback()

    if processor is None:
        return given
    return lambda row: processor(given(row))
