"""Shapes of the memory API and of what the extractor must return."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.compaction.schemas import MEMORY_TYPES, MemoryType
from app.core.timestamps import UtcDatetime

__all__ = [
    "MEMORY_TYPES",
    "ExtractedMemory",
    "ExtractionOutput",
    "MemoryCreate",
    "MemoryDeleted",
    "MemoryList",
    "MemoryOut",
    "MemoryType",
    "UserForgotten",
]


# ---- the extractor's output (validated; anything else is a failed call) ---------------------
class ExtractedMemory(BaseModel):
    content: str = Field(min_length=1, max_length=2000)
    memory_type: MemoryType = "fact"
    importance: int = Field(5, ge=1, le=10)
    supersedes: list[str] = Field(default_factory=list, max_length=20)


class ExtractionOutput(BaseModel):
    memories: list[ExtractedMemory] = Field(default_factory=list, max_length=50)


# ---- API ------------------------------------------------------------------------------------
class MemoryCreate(BaseModel):
    """A free-text memory (``content``), or a key/value fact (``key`` and ``value``)."""

    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1, max_length=200)
    content: str | None = Field(default=None, min_length=1, max_length=8000)
    key: str | None = Field(default=None, min_length=1, max_length=200)
    value: str | None = Field(default=None, min_length=1, max_length=8000)
    memory_type: MemoryType | None = None  # default: "note", or "fact" for a key/value fact
    importance: int = Field(5, ge=1, le=10)
    # Ids of memories this one replaces (they stay stored, marked superseded).
    supersedes: list[str] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _content_or_key_value(self) -> MemoryCreate:
        if self.key is not None or self.value is not None:
            if self.key is None or self.value is None:
                raise ValueError("a fact needs both 'key' and 'value'")
            if self.content is not None:
                raise ValueError("send 'content', or 'key' and 'value', not both")
            if self.supersedes:
                raise ValueError("a fact supersedes the old value of its key by itself")
            if not self.key.strip():
                raise ValueError("'key' must not be blank")
        elif self.content is None:
            raise ValueError("a memory needs 'content', or 'key' and 'value'")
        return self


class MemoryOut(BaseModel):
    id: str
    object: Literal["memory"] = "memory"
    user: str
    content: str
    key: str | None = None  # set for key/value facts; ``content`` is then the value
    memory_type: str
    importance: int
    confidence: float
    source: str
    conversation_id: str | None
    superseded_by: str | None
    created_at: UtcDatetime
    updated_at: UtcDatetime


class MemoryList(BaseModel):
    object: Literal["list"] = "list"
    data: list[MemoryOut]


class MemoryDeleted(BaseModel):
    id: str
    object: Literal["memory.deleted"] = "memory.deleted"
    deleted: bool = True


class UserForgotten(BaseModel):
    user: str
    object: Literal["memory.forgotten"] = "memory.forgotten"
    deleted: int
