"""``artifacts_processed`` covers the whole prompt (PROMPT.md invariant 9).

The context engine reports the artifacts it planned on this call; every other tool result the
prompt sends (a kept prompt's, or history sent as it is) is listed too, with the strategy in
force for it: ``include_full`` when sent as stored, ``exclude`` when a placeholder stands in.
Its id and source name where it lives, as the engine names historical results: ``hist_msg_12``,
``history:msg_12:get_weather``.
"""

from __future__ import annotations

from app.context.metadata import ArtifactOutcome
from app.conversations.messages import ConversationMessage
from app.tokens.counter import text_of
from app.wire.chat import ChatMessage

__all__ = ["complete_artifacts"]

PLACEHOLDER_START = "[contextgate: the result of tool"


def _names(messages: list[ChatMessage]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            names[str(call.get("id"))] = str(function.get("name") or "tool")
    return names


def complete_artifacts(
    messages: list[ChatMessage],
    planned: list[ArtifactOutcome],
    sources: list[ConversationMessage],
) -> list[ArtifactOutcome]:
    """``planned`` plus an outcome for every other tool result in ``messages``; ``sources``:
    the stored messages the prompt may come from (for their raw size and sequence)."""
    by_call = {str(m.tool_call_id): m for m in sources if m.role == "tool" and m.tool_call_id}
    by_sequence = {f"hist_msg_{m.sequence_number}": str(m.tool_call_id) for m in by_call.values()}
    listed = {by_sequence.get(o.artifact_id, o.artifact_id) for o in planned}
    names = _names(messages)
    extra: list[ArtifactOutcome] = []
    for message in messages:
        call_id = message.get("tool_call_id")
        if message.get("role") != "tool" or not call_id or call_id in listed:
            continue
        listed.add(call_id)
        sent = text_of(message.get("content"))
        source = by_call.get(call_id)
        original = len(text_of(source.content)) if source is not None else len(sent)
        sequence = source.sequence_number if source is not None else None
        name = names.get(call_id, message.get("name") or "tool")
        cleared = sent.startswith(PLACEHOLDER_START)
        extra.append(
            ArtifactOutcome(
                artifact_id=f"hist_msg_{sequence}" if sequence is not None else call_id,
                source=f"history:msg_{sequence}:{name}" if sequence is not None else f"tool:{name}",
                artifact_type="tool_result",
                strategy="exclude" if cleared else "include_full",
                original_size_chars=original,
                processed_size_chars=len(sent),
                carried=True,
            )
        )
    return [*planned, *extra]
