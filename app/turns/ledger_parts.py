"""The parts of each conversation's prompt ledger this process last read or wrote.

An agent's kept prompt grows by one part a call (app/db/models/prompt_ledger.py); reading the
parts before the newest back from the database every call would move the ~700 KiB the
append-only write saved. The newest part names the chain hash of the prompt it extends, so
the parts remembered here are used only when they end on that hash: another worker's write,
or a rebase, is never mistaken for this process's memory. Bounded by bytes, least recently
used out.

Each remembered part's messages are kept decoded too, once a read has decoded them (parsing an
agent's ~700 KiB prompt took ~0.5 ms a call): the ledger hands out these same message objects
on every call, so nothing on the way upstream may change a message in place (the prompt's
stages replace a message they mark; litellm gets a copy: app/llm/client.py). A decoded part
counts three times its bytes against the bound.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from app.wire.chat import ChatMessage

__all__ = ["LedgerParts"]

DEFAULT_BYTES = 32 * 1024 * 1024  # ~20 agent sessions of a 150k-token prompt, decoded
_DECODED_WEIGHT = 3  # a decoded part's Python objects, in its encoded bytes


@dataclass(slots=True)
class _Entry:
    base_part: int
    parts: tuple[bytes, ...]  # the base part's messages first
    chain: str  # the chain hash after the last part
    size: int
    decoded: list[tuple[ChatMessage, ...] | None] = field(default_factory=list)


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
        previous = self._entries.get(key)
        self.forget(tenant_id, conversation_id)
        entry = _Entry(base_part, parts, chain, sum(len(part) for part in parts))
        entry.decoded = [None] * len(parts)
        if previous is not None:  # the same part objects keep their decoding
            for index, (kept, decoded) in enumerate(
                zip(previous.parts, previous.decoded, strict=True)
            ):
                if index >= len(parts) or parts[index] is not kept:
                    break
                entry.decoded[index] = decoded
                if decoded is not None:
                    entry.size += _DECODED_WEIGHT * len(kept)
        self._add(key, entry)

    def messages(
        self, tenant_id: str, conversation_id: str, parts: Sequence[bytes]
    ) -> tuple[ChatMessage, ...]:
        """The messages of ``parts``, in order: each part remembered here (the same object)
        decoded once, the others decoded now."""
        key = (tenant_id, conversation_id)
        entry = self._entries.get(key)
        messages: list[ChatMessage] = []
        grew = 0
        for index, part in enumerate(parts):
            if entry is None or index >= len(entry.parts) or entry.parts[index] is not part:
                messages.extend(orjson.loads(part))
                continue
            decoded = entry.decoded[index]
            if decoded is None:
                decoded = entry.decoded[index] = tuple(orjson.loads(part))
                grew += _DECODED_WEIGHT * len(part)
            messages.extend(decoded)
        if entry is not None and grew:
            self.forget(*key)
            entry.size += grew
            self._add(key, entry)
        return tuple(messages)

    def _add(self, key: tuple[str, str], entry: _Entry) -> None:
        if entry.size > self._max_bytes:
            return
        self._entries[key] = entry
        self._bytes += entry.size
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
