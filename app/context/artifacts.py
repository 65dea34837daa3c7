"""Artifacts: the pieces of information a request carries besides its conversation.

Three sources: tool results of the current turn, tool results of earlier turns (from the
loaded history's reasoning steps, a bounded number of turns back) and attached documents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, TypedDict

from pydantic import BaseModel, Field

from app.conversations.messages import ConversationMessage
from app.tokens.counter import text_of

__all__ = [
    "Artifact",
    "ArtifactDecision",
    "ArtifactMetadata",
    "ArtifactPlan",
    "ArtifactType",
    "Context",
    "ProcessingStrategy",
    "current_tool_artifacts",
    "historical_tool_artifacts",
]


class ArtifactMetadata(TypedDict, total=False):
    """Where an artifact comes from, beside its source."""

    sequence_number: int  # a tool result's stored message
    historical: bool  # a tool result of an earlier turn
    stored: bool  # an attachment stored with the conversation (app/attachments)


if TYPE_CHECKING:
    _MetadataField = ArtifactMetadata
else:  # pydantic cannot build a schema from typing.TypedDict on Python 3.11: a plain object
    from app.wire.json import JSONObject as _MetadataField


class ArtifactType(StrEnum):
    TOOL_RESULT = "tool_result"
    DOCUMENT = "document"


class ProcessingStrategy(StrEnum):
    INCLUDE_FULL = "include_full"
    SUMMARIZE = "summarize"
    RAG_EXTRACT = "rag_extract"
    EXCLUDE = "exclude"


class Artifact(BaseModel):
    """One artifact. ``tool_call_id`` ties a tool result to the tool message that carries it."""

    id: str
    artifact_type: ArtifactType
    source: str
    content: str
    title: str | None = None
    tool_call_id: str | None = None
    tokens: int = 0
    metadata: _MetadataField = Field(default_factory=ArtifactMetadata)

    @property
    def size_chars(self) -> int:
        return len(self.content)

    @property
    def historical(self) -> bool:
        return bool(self.metadata.get("historical"))


class ArtifactDecision(BaseModel):
    """What to do with one artifact. ``priority``: 1 is the most important."""

    artifact_id: str
    strategy: ProcessingStrategy
    priority: int = Field(default=5, ge=1, le=100)
    relevance_rationale: str = ""
    summarization_focus: str | None = None
    extraction_query: str | None = None


class ArtifactPlan(BaseModel):
    artifacts: list[ArtifactDecision] = Field(default_factory=list)
    reasoning: str = ""


@dataclass(slots=True)
class Context:
    """Every artifact of one request, by source."""

    tool_results: list[Artifact] = field(default_factory=list)
    historical_tool_results: list[Artifact] = field(default_factory=list)
    attachments: list[Artifact] = field(default_factory=list)

    def all_artifacts(self) -> list[Artifact]:
        return [*self.tool_results, *self.historical_tool_results, *self.attachments]


def _tool_names(messages: list[ConversationMessage]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in message.tool_calls or []:
            function = call.get("function") or {}
            names[str(call.get("id") or "")] = str(function.get("name") or "tool")
    return names


def current_tool_artifacts(current: list[ConversationMessage]) -> list[Artifact]:
    """The tool results of the current turn; the artifact id is the tool call id."""
    names = _tool_names(current)
    artifacts: list[Artifact] = []
    seen: set[str] = set()
    for message in current:
        if message.role != "tool" or not message.tool_call_id:
            continue
        call_id = message.tool_call_id
        artifact_id = call_id if call_id not in seen else f"{call_id}_{message.sequence_number}"
        seen.add(artifact_id)
        artifacts.append(
            Artifact(
                id=artifact_id,
                artifact_type=ArtifactType.TOOL_RESULT,
                source=f"tool:{names.get(call_id, message.name or 'tool')}",
                content=text_of(message.content),
                tool_call_id=call_id,
                metadata={"sequence_number": message.sequence_number, "historical": False},
            )
        )
    return artifacts


def historical_tool_artifacts(
    history: list[ConversationMessage], *, turns_back: int
) -> list[Artifact]:
    """Tool results stored in the last ``turns_back`` turns of the loaded history.

    They come from the assistant messages' reasoning steps, paired with the tool message that
    is actually in the window (only those can be sent in a processed form).
    """
    if turns_back <= 0:
        return []
    user_indexes = [i for i, m in enumerate(history) if m.role == "user"]
    start = user_indexes[-turns_back] if len(user_indexes) >= turns_back else 0
    window = history[start:]
    tool_messages = {m.sequence_number: m for m in window if m.role == "tool"}
    artifacts: list[Artifact] = []
    for message in window:
        for step in message.reasoning_steps:
            sequence = step.result_sequence_number
            if sequence is None or sequence not in tool_messages:
                continue
            name = step.tool_name or "tool"
            artifacts.append(
                Artifact(
                    id=f"hist_msg_{sequence}",
                    artifact_type=ArtifactType.TOOL_RESULT,
                    source=f"history:msg_{sequence}:{name}",
                    content=text_of(tool_messages[sequence].content),
                    tool_call_id=step.tool_call_id,
                    metadata={"sequence_number": sequence, "historical": True},
                )
            )
    return artifacts
