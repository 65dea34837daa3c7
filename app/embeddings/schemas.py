"""OpenAI's embeddings request."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.protocol.bounds import MAX_USER_CHARS

# OpenAI's limits: at most 2048 inputs per request; token ids are vocabulary indexes.
Token = Annotated[int, Field(ge=0, le=2**31 - 1)]

__all__ = ["EmbeddingsRequest"]


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    input: (
        str
        | Annotated[list[str], Field(max_length=2048)]
        | Annotated[list[Token], Field(max_length=2048)]
        | Annotated[list[list[Token]], Field(max_length=2048)]
    )
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1, le=16384)
    user: str | None = Field(default=None, max_length=MAX_USER_CHARS)

    def has_input(self) -> bool:
        if isinstance(self.input, str):
            return bool(self.input)
        return bool(self.input) and all(item != "" and item != [] for item in self.input)
