"""Builders shared by the context-engine tests."""

from __future__ import annotations

from app.context.artifacts import Artifact, ArtifactType
from app.tokens.counter import TokenCounter

COUNTER = TokenCounter()
MODEL = "gpt-4o-mini"


def count(text: str) -> int:
    return COUNTER.count_text(text, MODEL)


def truncate(text: str, tokens: int) -> str:
    if tokens <= 0:
        return ""
    encoding = COUNTER.encoding(MODEL)
    ids = encoding.encode(text, disallowed_special=())
    return text if len(ids) <= tokens else encoding.decode(ids[:tokens])


def artifact(
    artifact_id: str,
    content: str,
    *,
    tool: bool = False,
    historical: bool = False,
    title: str | None = None,
) -> Artifact:
    made = Artifact(
        id=artifact_id,
        artifact_type=ArtifactType.TOOL_RESULT if tool else ArtifactType.DOCUMENT,
        source=f"history:msg_3:{artifact_id}" if historical else f"test:{artifact_id}",
        content=content,
        title=title,
        tool_call_id=f"call_{artifact_id}" if tool else None,
        metadata={"historical": historical, "sequence_number": 1},
    )
    made.tokens = count(content)
    return made
