"""OpenAI's embeddings request."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EmbeddingsRequest"]


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None

    def has_input(self) -> bool:
        if isinstance(self.input, str):
            return bool(self.input)
        return bool(self.input) and all(item != "" and item != [] for item in self.input)
