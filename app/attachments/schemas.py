"""API shapes of /v1/attachments."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.timestamps import UtcDatetime

__all__ = ["AttachmentCreate", "AttachmentDeleted", "AttachmentDetail", "AttachmentInfo"]


class AttachmentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1)
    title: str | None = Field(default=None, max_length=500)
    source: str | None = Field(default=None, max_length=1000)


class AttachmentInfo(BaseModel):
    id: str
    object: Literal["attachment"] = "attachment"
    title: str | None
    source: str | None
    filename: str | None
    media_type: str
    size_bytes: int
    char_count: int
    content_hash: str
    created_at: UtcDatetime


class AttachmentDetail(AttachmentInfo):
    content: str


class AttachmentDeleted(BaseModel):
    id: str
    object: Literal["attachment"] = "attachment"
    deleted: bool = True
