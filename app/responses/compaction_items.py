"""Codex's and OpenAI's compaction items on the Responses door.

A ``compaction_trigger`` item (last in the input) asks for the history before it to be
compacted: contextgate answers with one ``compaction`` item whose sealed ``encrypted_content``
names the stored conversation (compaction_seal.py). When a later request sends that item back,
everything before it stands for the stored conversation: the turn continues that conversation
with the items after it, and the pipeline sends its summaries, raw tail and recall upstream.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.errors import BadRequest
from app.core.settings import Settings
from app.responses.compaction_seal import SealedCompaction, seal
from app.wire.responses import CompactionItem as SealedItem

if TYPE_CHECKING:
    from app.turns.prepared import Prepared

__all__ = [
    "CompactionItem",
    "CompactionTriggerItem",
    "compaction_item",
    "server_side_item",
    "trigger_index",
]


class CompactionTriggerItem(BaseModel):
    """Codex's request to compact everything before it (``remote_compaction_v2``)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["compaction_trigger"]


class CompactionItem(BaseModel):
    """A compaction item sent back: only contextgate's own (sealed) are accepted."""

    model_config = ConfigDict(extra="allow")
    type: Literal["compaction"]
    id: str | None = None
    encrypted_content: str = Field(min_length=1)


def compaction_item(
    settings: Settings, tenant_id: str, item_id: str, sealed: SealedCompaction
) -> SealedItem:
    return {
        "id": item_id,
        "type": "compaction",
        "encrypted_content": seal(settings, tenant_id, sealed),
        "created_by": "contextgate",
    }


def trigger_index(items: Sequence[object]) -> int | None:
    """Where the input's compaction trigger is; only last is it meaningful (else a 400)."""
    found = [i for i, item in enumerate(items) if isinstance(item, CompactionTriggerItem)]
    if not found:
        return None
    if found != [len(items) - 1]:
        raise BadRequest(
            "A compaction_trigger item must be the last input item, and only one.",
            param=f"input.{found[0]}",
            code="invalid_compaction_trigger",
        )
    return found[0]


def server_side_item(settings: Settings, tenant_id: str, prepared: Prepared) -> SealedItem | None:
    """``context_management``'s compaction item, when this request's turn compacted its
    conversation (OpenAI's server-side compaction): sealed like any other."""
    compaction = prepared.utilization.compaction or {}
    resolved = prepared.resolved
    if not compaction.get("summary_ids") or resolved is None:
        return None
    before = resolved.conversation.message_count if resolved.conversation is not None else 0
    upto = before + len(prepared.new_messages) + 1  # the stored turn's end
    sealed = SealedCompaction(resolved.conversation_id, upto)
    return compaction_item(settings, tenant_id, f"cmp_{secrets.token_hex(16)}", sealed)
