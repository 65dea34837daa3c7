"""The parts of each conversation's prompt ledger this process last read or wrote.

An agent's kept prompt grows by one part a call (app/db/models/prompt_ledger.py); reading the
parts before the newest back from the database every call would move the ~700 KiB the
append-only write saved. The newest part names the chain hash of the prompt it extends, so
the parts remembered here are used only when they end on that hash: another worker's write,
or a rebase, is never mistaken for this process's memory. Bounded by bytes, least recently
used out.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["LedgerParts"]

DEFAULT_BYTES = 32 * 1024 * 1024  # ~50 agent sessions of a 150k-token prompt


@dataclass(frozen=True, slots=True)
class _Entry:
    base_part: int
    parts: tuple[bytes, ...]  # the base part's messages first
    chain: str  # the chain hash after the last part
    size: int


class LedgerParts:
    """(tenant, conversation) -> the encoded parts of its ledger, from the base part on."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()

    def prefix(
        self,
        tenant_id: str,
        conversation_id: str,
        newest: tuple[int, int, str, str],
    ) -> tuple[bytes, ...] | None:
        """The parts before the newest one, if remembered: ``newest`` is that part's (base part,
        part, chain hash, previous chain hash). This process wrote the newest part (the
        remembered parts end on its chain), or only read up to the one before it."""
        base_part, part, chain, previous_chain = newest
        key = (tenant_id, conversation_id)
        entry = self._entries.get(key)
        before = part - base_part
        if entry is None or entry.base_part != base_part or before < 1:
            return None
        if len(entry.parts) == before + 1 and entry.chain == chain:
            found = entry.parts[:before]
        elif len(entry.parts) == before and entry.chain == previous_chain:
            found = entry.parts
        else:
            return None
        self._entries.move_to_end(key)
        return found

    def put(
        self,
        tenant_id: str,
        conversation_id: str,
        base_part: int,
        parts: tuple[bytes, ...],
        chain: str,
    ) -> None:
        key = (tenant_id, conversation_id)
        self.forget(tenant_id, conversation_id)
        size = sum(len(part) for part in parts)
        if size > self._max_bytes:
            return
        self._entries[key] = _Entry(base_part, parts, chain, size)
        self._bytes += size
        while self._bytes > self._max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.size

    def forget(self, tenant_id: str, conversation_id: str) -> None:
        dropped = self._entries.pop((tenant_id, conversation_id), None)
        if dropped is not None:
            self._bytes -= dropped.size

    @property
    def size(self) -> int:
        """Bytes held."""
        return self._bytes

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0
