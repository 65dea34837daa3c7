"""Relevance: BM25 (bm25s) by default, embeddings when an embedding model is configured.

Used to rank artifacts against the question (deterministic path) and chunks against an
extraction query (rag_extract). bm25s is imported when something is first scored (issue 26:
a short request never ranks anything, and the library with its tqdm is ~8 MB).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from app.core.lazy_module import lazy_module

if TYPE_CHECKING:
    import numpy
else:
    numpy = lazy_module("numpy", globals(), "numpy")

__all__ = ["Embedder", "bm25_scores", "chunk_text", "cosine", "rank_chunks"]

logger = logging.getLogger(__name__)

# (texts) -> vectors; raises on failure (the caller falls back to BM25).
Embedder = Callable[[list[str]], Awaitable[list[list[float]]]]
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def bm25_scores(query: str, documents: Sequence[str]) -> list[float]:
    """BM25 score of every document for the query; all zeros when nothing matches."""
    if not documents:
        return []
    import bm25s

    try:
        corpus = bm25s.tokenize(list(documents), stopwords="en", show_progress=False)
        if not corpus.vocab or not any(len(ids) for ids in corpus.ids):
            return [0.0] * len(documents)
        retriever = bm25s.BM25()
        with numpy.errstate(all="ignore"):
            retriever.index(corpus, show_progress=False)
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        query_tokens = [t for t in tokens[0] if t in corpus.vocab]
        if not query_tokens:
            return [0.0] * len(documents)
        with numpy.errstate(all="ignore"):
            return [float(s) for s in retriever.get_scores(query_tokens)]
    except (ValueError, IndexError, KeyError):  # an empty vocabulary (only stopwords)
        logger.debug("bm25 could not score", exc_info=True)
        return [0.0] * len(documents)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _units(paragraph: str, max_chars: int) -> list[str]:
    """Lines, then sentences, then hard cuts: pieces no longer than ``max_chars``."""
    units: list[str] = []
    for line in paragraph.splitlines():
        pieces = [line] if len(line) <= max_chars else _SENTENCE.split(line)
        for piece in pieces:
            while len(piece) > max_chars:
                units.append(piece[:max_chars])
                piece = piece[max_chars:]
            if piece.strip():
                units.append(piece)
    return units


def chunk_text(text: str, max_chars: int = 1200) -> list[str]:
    """Split on paragraphs, packing lines or sentences of long ones; keeps document order."""
    chunks: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= max_chars:
            chunks.append(paragraph)
            continue
        current = ""
        for unit in _units(paragraph, max_chars):
            if current and len(current) + 1 + len(unit) > max_chars:
                chunks.append(current)
                current = ""
            current = f"{current} {unit}" if current else unit
        if current.strip():
            chunks.append(current)
    return chunks


async def rank_chunks(
    query: str, chunks: list[str], embedder: Embedder | None = None
) -> tuple[list[float], str | None]:
    """Scores of the chunks for the query, and a note when embeddings failed."""
    if embedder is not None and chunks:
        try:
            vectors = await embedder([query, *chunks])
            return [cosine(vectors[0], v) for v in vectors[1:]], None
        except Exception as exc:  # embeddings are an optimization: fall back to BM25
            logger.warning("embedding failed, using BM25", extra={"error": str(exc)[:200]})
            note = f"embeddings failed ({type(exc).__name__}); BM25 used for extraction"
            return await asyncio.to_thread(bm25_scores, query, chunks), note
    # CPU-bound: keep the event loop free for other requests' I/O.
    return await asyncio.to_thread(bm25_scores, query, chunks), None
