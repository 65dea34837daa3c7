"""Embeddings for memories, through the one LLM client (routing, retries, cost)."""

from __future__ import annotations

from app.core.errors import ContextGateError
from app.state import AppState

__all__ = ["EmbeddingFailed", "embed"]


class EmbeddingFailed(Exception):
    """The embeddings model could not be reached or answered nonsense."""


async def embed(state: AppState, model: str, texts: list[str]) -> list[list[float]]:
    if not texts:
        return []
    try:
        vectors, _cost = await state.llm.embed(
            model, texts, timeout=state.settings.summarizer_timeout_s
        )
    except ContextGateError as exc:
        raise EmbeddingFailed(f"embeddings with {model} failed: {exc.message[:200]}") from exc
    if len(vectors) != len(texts):
        raise EmbeddingFailed(f"embeddings with {model}: wrong number of vectors")
    return vectors
