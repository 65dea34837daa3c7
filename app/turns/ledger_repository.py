"""The prompt owner's SQL: a conversation's ledger is read with its newest part, and each call
writes one part (app/db/models/prompt_ledger.py): what it appended to a kept prompt, or a whole
rebased prompt as a new base.

The parts before the newest come from this process's memory of them (``LedgerParts``), checked
by chain hash, else from one more statement; a ledger whose parts do not chain up (another
writer replaced them meanwhile) is no ledger: the next prompt is assembled anew.
"""

from __future__ import annotations

from functools import lru_cache

import orjson
from sqlalchemy import Delete, Insert, bindparam, delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import PromptLedgerRow, utcnow
from app.db.repository import TenantScope, execute_core
from app.db.upsert import dialect_insert
from app.turns.ledger_parts import LedgerParts
from app.turns.owner import Ledger, LedgerValues, PromptRecord

__all__ = ["complete_ledger", "ledger_parts", "load_ledger", "remember_ledger", "save_ledger"]

ledger_parts = LedgerParts()  # per process: the parts this process last read or wrote

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
    "part",
    "base_part",
)


async def load_ledger(session: AsyncSession, tenant_id: str, conversation_id: str) -> Ledger | None:
    """The conversation's ledger, read on its own (not with its conversation)."""
    newest = (
        select(PromptLedgerRow)
        .where(PromptLedgerRow.conversation_id == conversation_id, _scope.tenant_clause(tenant_id))
        .order_by(PromptLedgerRow.part.desc())
        .limit(1)
    )
    row = (await session.execute(newest)).scalar_one_or_none()
    return await complete_ledger(session, row)


async def complete_ledger(session: AsyncSession, row: PromptLedgerRow | None) -> Ledger | None:
    """The ledger whose newest part is ``row`` (read alone, or with its conversation)."""
    if row is None:
        return None
    if row.part == row.base_part:
        parts: tuple[bytes, ...] = (row.messages,)
    else:
        newest = (row.base_part, row.part, row.chain_hash, row.previous_chain)
        prefix = ledger_parts.prefix(row.tenant_id, row.conversation_id, newest)
        if prefix is None:
            prefix = await _read_prefix(session, row)
            if prefix is None:
                return None
        parts = (*prefix, row.messages)
    ledger_parts.put(row.tenant_id, row.conversation_id, row.base_part, parts, row.chain_hash)
    return Ledger(
        **{name: getattr(row, name) for name in _COLUMNS},
        messages=ledger_parts.messages(row.tenant_id, row.conversation_id, parts),
        artifacts=tuple(orjson.loads(row.artifacts)),
        encoded_parts=parts,
    )


async def _read_prefix(session: AsyncSession, newest: PromptLedgerRow) -> tuple[bytes, ...] | None:
    """The parts from the base to the one before ``newest``, if they chain up to it."""
    statement = (
        select(
            PromptLedgerRow.part,
            PromptLedgerRow.previous_chain,
            PromptLedgerRow.chain_hash,
            PromptLedgerRow.messages,
        )
        .where(
            PromptLedgerRow.conversation_id == newest.conversation_id,
            _scope.tenant_clause(newest.tenant_id),
            PromptLedgerRow.part >= newest.base_part,
            PromptLedgerRow.part < newest.part,
        )
        .order_by(PromptLedgerRow.part)
    )
    rows = (await session.execute(statement)).all()
    expected = list(range(newest.base_part, newest.part))
    if [row.part for row in rows] != expected or rows[0].previous_chain != "":
        return None
    for earlier, later in zip(rows, rows[1:], strict=False):
        if later.previous_chain != earlier.chain_hash:
            return None
    if rows[-1].chain_hash != newest.previous_chain:
        return None
    return tuple(row.messages for row in rows)


async def save_ledger(
    session: AsyncSession,
    tenant_id: str,
    conversation_id: str,
    values: LedgerValues,
    *,
    replaces: bool,
) -> None:
    """Write this call's part (``values``: ``PromptRecord.row``). ``replaces``: the part is a
    base on a conversation that may hold earlier parts, which go (one more statement, on a
    rebase only)."""
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    # Core: the ORM adds nothing to these
    if replaces:
        keys = {"conversation_id": conversation_id, "tenant_id": tenant_id}
        await execute_core(session, _drop_parts(), keys)
    params = {
        "conversation_id": conversation_id,
        "tenant_id": tenant_id,
        **values,
        "updated_at": utcnow(),
    }
    await execute_core(session, _upsert(dialect), params)


def remember_ledger(tenant_id: str, conversation_id: str, prompt: PromptRecord, chain: str) -> None:
    """Once the part is stored: this process knows the ledger's parts for the next call."""
    ledger_parts.put(tenant_id, conversation_id, prompt.base_part, prompt.parts, chain)


_SAVED = (*_COLUMNS, "previous_chain", "messages", "artifacts", "updated_at")


@lru_cache(maxsize=4)
def _upsert(dialect: str) -> Insert:
    """The upsert, built once per dialect with a parameter per column: building it from the
    values every call cost ~1 ms of SQLAlchemy work (a part is written every call). Two
    writers of the same part: the last one's stands (each part is whole on its own)."""
    statement = dialect_insert(dialect, PromptLedgerRow).values(
        {name: bindparam(name) for name in ("conversation_id", "tenant_id", *_SAVED)}
    )
    return statement.on_conflict_do_update(
        index_elements=["conversation_id", "part"],
        set_={name: statement.excluded[name] for name in _SAVED if name != "part"},
    )


@lru_cache(maxsize=1)
def _drop_parts() -> Delete:
    return delete(PromptLedgerRow).where(
        PromptLedgerRow.conversation_id == bindparam("conversation_id"),
        _scope.tenant_clause(bindparam("tenant_id")),
    )
