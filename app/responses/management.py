"""How much of a Responses request's context contextgate manages, in OpenAI's words.

- ``store: false``: managed by default (the conversation is stored, its context fitted and
  compacted; no response object kept), or passed through untouched where the operator must
  honour it strictly (``CONTEXTGATE_RESPONSES_STORE_FALSE=passthrough``).
- ``context_management: [{"type": "compaction", "compact_threshold": N}]``: compact once the
  context passes N tokens: N becomes this request's input budget, so contextgate's compaction
  and fit keep the request within it.
- ``truncation: "auto"``: fit the input to the window (what a managed request does anyway).

Each decision is said in ``context_utilization.notes``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.core.errors import BadRequest
from app.core.settings import Settings
from app.protocol.chat import ContextOptions
from app.responses.schemas import ResponsesRequest

__all__ = ["compact_threshold", "managed_context"]


def compact_threshold(entries: Sequence[Mapping[str, object]] | None) -> int | None:
    """The compaction threshold of ``context_management``, validated (a 400 otherwise)."""
    threshold: int | None = None
    for index, entry in enumerate(entries or ()):
        where = f"context_management.{index}"
        if entry.get("type") != "compaction":
            raise BadRequest(
                "context_management entries may be of type 'compaction' only.",
                param=f"{where}.type",
                code="unsupported_context_management",
            )
        value = entry.get("compact_threshold")
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadRequest(
                "compact_threshold must be a positive integer (tokens).",
                param=f"{where}.compact_threshold",
                code="invalid_compact_threshold",
            )
        threshold = value if threshold is None else min(threshold, value)
    return threshold


def managed_context(settings: Settings, body: ResponsesRequest) -> tuple[ContextOptions, list[str]]:
    """The request's context options after ``store``, ``context_management`` and
    ``truncation``; and the notes that say what was done."""
    context, notes = body.context, []
    threshold = compact_threshold(body.context_management)
    if not body.store:
        if settings.responses_store_false == "passthrough":
            context = context.model_copy(update={"enabled": False})
            notes.append(
                "store=false: passed through unmanaged, nothing stored "
                "(CONTEXTGATE_RESPONSES_STORE_FALSE=passthrough)"
            )
        elif context.enabled:
            notes.append(
                "store=false: the conversation is stored and its context managed, no response "
                "object is kept (CONTEXTGATE_RESPONSES_STORE_FALSE=manage)"
            )
    if not context.enabled:
        if threshold is not None or body.truncation == "auto":
            notes.append("context_management/truncation not applied: context is not managed")
        return context, notes
    if threshold is not None:
        budget = min(context.max_input_tokens or threshold, threshold)
        context = context.model_copy(update={"max_input_tokens": budget})
        notes.append(
            f"context_management: compaction past {threshold} tokens "
            f"(this request's input budget is {budget})"
        )
    if body.truncation == "auto":
        notes.append("truncation=auto: the input is fitted to the budget by contextgate")
    return context, notes
