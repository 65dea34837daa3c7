"""The INSERT of a database's dialect, for its ``ON CONFLICT`` clauses.

PostgreSQL's dialect is imported when first used: importing it cost a SQLite server ~40 ms of
its start (issue 26, ready time), and a SQLite server never uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.dialects.sqlite import Insert as SQLiteInsert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql import Insert as PostgresInsert

__all__ = ["dialect_insert"]


def dialect_insert(dialect: str, table: Any) -> SQLiteInsert | PostgresInsert:
    """``INSERT INTO table`` in the dialect named (``postgresql``; anything else: SQLite)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert(table)
    return sqlite_insert(table)
