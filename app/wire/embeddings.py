"""OpenAI's embeddings answer, as ``POST /v1/embeddings`` gives it."""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = ["EmbeddingInput", "Embedding", "EmbeddingsResponse", "EmbeddingsUsage"]

EmbeddingInput = str | list[str] | list[int] | list[list[int]]
"""One text, texts, or token ids (one list of them, or several)."""


class Embedding(TypedDict):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str  # floats, or base64 (``encoding_format: base64``)


class EmbeddingsUsage(TypedDict):
    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(TypedDict):
    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: EmbeddingsUsage
