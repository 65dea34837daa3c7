"""API shapes of /v1/keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from app.core.timestamps import UtcDatetime

__all__ = ["KeyCreate", "KeyCreated", "KeyDeleted", "KeyInfo", "KeyList"]


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    max_budget: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    rpm_limit: int | None = Field(default=None, ge=1, le=1_000_000)
    expires_at: AwareDatetime | None = Field(
        default=None,
        description="When the key stops working (ISO-8601 with a zone, in the future); "
        "after it, requests with the key get 401 code expired_api_key.",
    )

    @field_validator("expires_at")
    @classmethod
    def _in_the_future(cls, value: datetime | None) -> datetime | None:
        if value is not None and value <= datetime.now(UTC):
            raise ValueError("expires_at must be in the future")
        return value


class KeyInfo(BaseModel):
    id: str
    object: Literal["api_key"] = "api_key"
    name: str
    key_prefix: str
    max_budget: float | None
    rpm_limit: int | None
    created_at: UtcDatetime
    expires_at: UtcDatetime | None = None
    spend: float = Field(
        default=0.0,
        description="USD this key (its own tenant) has spent: every request's total_cost, the "
        "provider's prompt cache priced at its own read and write rates. max_budget caps it.",
    )


class KeyCreated(KeyInfo):
    key: str = Field(description="The key itself. It is shown once and stored only hashed.")


class KeyList(BaseModel):
    object: Literal["list"] = "list"
    data: list[KeyInfo]


class KeyDeleted(BaseModel):
    id: str
    object: Literal["api_key.deleted"] = "api_key.deleted"
    deleted: bool = True
