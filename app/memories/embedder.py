"""The embedder of memories and message recall: one per process, chosen by the settings.

- ``embedded`` (default): WordLlama's 256-dim weights, shipped inside the ``wordllama`` package
  and loaded from it with downloads disabled: no network, no key, ~0.4 s to load, ~20k short
  texts/s on one core. Embedding runs on a worker thread, never on the event loop.
- ``CONTEXTGATE_EMBEDDING_MODEL`` set: that model through litellm (routing, retries, cost).
- ``CONTEXTGATE_EMBEDDER=bm25``: no embedder; retrieval is BM25 only.

Every embedder returns unit-length float32 rows, so a dot product is a cosine. Its
``min_similarity`` is the calibrated cosine under which a match is too weak to inject
(``bench/retrieval.py`` measures it for the embedded model; see bench/README.md).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from app.core.errors import ContextGateError

if TYPE_CHECKING:
    from app.core.settings import Settings
    from app.llm.client import LLMClient

__all__ = [
    "EMBEDDED_MIN_SIMILARITY",
    "EMBEDDED_NAME",
    "LITELLM_MIN_SIMILARITY",
    "EmbeddedEmbedder",
    "Embedder",
    "EmbeddingFailed",
    "FUNCTION_WORDS",
    "LiteLLMEmbedder",
    "build_embedder",
    "decode_vector",
    "meaningful",
    "encode_vector",
    "unit_rows",
]

logger = logging.getLogger(__name__)

EMBEDDED_NAME = "wordllama/l2_supercat_256/content-words"
# Calibrated on bench/retrieval.py (220 memories, 120 questions; bench/README.md): the cosine
# that keeps 85 % of the right matches; 3 % of unrelated pairs reach it. The model is a bag of
# word vectors: right and wrong matches overlap, so a higher floor loses right ones fast.
EMBEDDED_MIN_SIMILARITY = 0.15
# The seeds' value for OpenAI's text-embedding-3-small; set your own for other models.
LITELLM_MIN_SIMILARITY = 0.45


# Function words (and "user", which every memory is about) carry no meaning for a model that
# averages word vectors; dropped before the embedded model sees a text (bench/README.md: +3-5
# points of recall@8 on paraphrased questions).
FUNCTION_WORDS = frozenset(
    "a an the is are am was were be been of in on at to for by with and or do does did i me my "
    "we our you your he she her his they their them it its this that what which who whom when "
    "where why how should can could would will shall must may might not no any some every "
    "there here as from into about after before over under up down out than then so very "
    "user users".split()
)
_RECENT_QUERIES = 128
_WORD = re.compile(r"[\w'-]+")


def meaningful(text: str) -> str:
    """``text`` without function words (the text itself when nothing else is left)."""
    words = [w for w in _WORD.findall(text) if w.lower() not in FUNCTION_WORDS]
    return " ".join(words) if words else text


class EmbeddingFailed(Exception):
    """The embeddings model could not be reached or answered nonsense."""


class Embedder(Protocol):
    name: str
    min_similarity: float

    async def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def unit_rows(matrix: Any) -> np.ndarray:
    rows = np.asarray(matrix, dtype=np.float32)
    if rows.ndim == 1:
        rows = rows.reshape(1, -1)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.asarray(rows / np.where(norms == 0, 1.0, norms), dtype=np.float32)


def encode_vector(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def decode_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


class EmbeddedEmbedder:
    """WordLlama from the package's own folder; loaded once (``load``), used from threads."""

    name = EMBEDDED_NAME

    def __init__(self, min_similarity: float = EMBEDDED_MIN_SIMILARITY) -> None:
        self.min_similarity = min_similarity
        self.load_seconds: float | None = None
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            started = time.perf_counter()
            import wordllama
            from wordllama import WordLlama

            folder = Path(wordllama.__file__).parent
            self._model = WordLlama.load(cache_dir=folder, disable_download=True)
            self.load_seconds = time.perf_counter() - started
            logger.info("embedded embedder loaded", extra={"seconds": round(self.load_seconds, 3)})

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        if self._model is None:
            self.load()
        if not texts:
            return np.zeros((0, 256), dtype=np.float32)
        return unit_rows(self._model.embed([meaningful(t) for t in texts], norm=True))

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 256), dtype=np.float32)
        return await asyncio.to_thread(self.embed_sync, list(texts))


class LiteLLMEmbedder:
    """An embeddings model through the one LLM client (routing, retries, cost)."""

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
    return EmbeddedEmbedder(EMBEDDED_MIN_SIMILARITY if chosen is None else chosen)
