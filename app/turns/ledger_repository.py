"""The prompt owner's SQL: one ledger row per conversation, read and upserted once a call."""

from __future__ import annotations

from functools import lru_cache

import orjson
from sqlalchemy import Insert, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import PromptLedgerRow, utcnow
from app.db.repository import TenantScope
from app.turns.owner import Ledger, LedgerValues

__all__ = ["ledger_of", "load_ledger", "save_ledger"]

_scope: TenantScope[PromptLedgerRow] = TenantScope(PromptLedgerRow)
_COLUMNS = (
    "epoch",
    "answer_sequence",
    "answer_tokens",
    "own_system_hash",
    "attachments_key",
    "tokens",
    "system_tokens",
    "memory_tokens",
    "chain_hash",
    "cleared_tool_results",
    "cleared_tokens",
    "messages_excluded",
)


async def load_ledger(session: AsyncSession, tenant_id: str, conversation_id: str) -> Ledger | None:
    row = (
        await session.execute(
            select(PromptLedgerRow).where(
                PromptLedgerRow.conversation_id == conversation_id,
                _scope.tenant_clause(tenant_id),
            )
        )
    ).scalar_one_or_none()
    return ledger_of(row)


def ledger_of(row: PromptLedgerRow | None) -> Ledger | None:
    """The ledger a stored row holds (read alone, or with its conversation)."""
    if row is None:
        return None
    return Ledger(
        **{name: getattr(row, name) for name in _COLUMNS},
        messages=tuple(orjson.loads(row.messages)),
        artifacts=tuple(orjson.loads(row.artifacts)),
    )


async def save_ledger(
    session: AsyncSession, tenant_id: str, conversation_id: str, values: LedgerValues
) -> None:
    """Upsert the conversation's ledger (one statement); ``values``: ``PromptRecord.row``."""
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    params = {
        "conversation_id": conversation_id,
        "tenant_id": tenant_id,
        **values,
        "updated_at": utcnow(),
    }
    connection = await session.connection()  # Core: the ORM adds nothing to an upsert
    await connection.execute(_upsert(dialect), params)


_SAVED = (*_COLUMNS, "messages", "artifacts", "updated_at")


@lru_cache(maxsize=4)
def _upsert(dialect: str) -> Insert:
    """The upsert, built once per dialect with a parameter per column: building it from the
    values every call cost ~1 ms of SQLAlchemy work (a prompt ledger is saved every call)."""
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    statement = insert(PromptLedgerRow).values(
        {name: bindparam(name) for name in ("conversation_id", "tenant_id", *_SAVED)}
    )
    return statement.on_conflict_do_update(
        index_elements=["conversation_id"],
        set_={name: statement.excluded[name] for name in _SAVED},
    )
