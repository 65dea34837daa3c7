"""BM25 over memories' contents (bm25s), and which lexical matches are strong enough to count.

bm25s cannot add a document to an index: a user's index (memory_index.py) keeps every memory's
tokens, so a new index is built from them without tokenizing again (``LexicalIndex.from_tokens``).

bm25s (and the tqdm it imports) is imported when the first memory is tokenized: ~8 MB of a
process that may never retrieve a memory (issue 26).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from app.core.lazy_module import lazy_module

if TYPE_CHECKING:
    import bm25s
    import numpy as np
else:
    np = lazy_module("numpy", globals(), "np")

__all__ = ["LEXICAL_COVERAGE", "LEXICAL_STRONG", "LexicalIndex", "tokenize"]

# Raw BM25 from which a lexical match counts: it joins the fusion and is eligible without the
# cosine (a rare exact name, id or number the embedder does not see). Weaker BM25 matches are
# incidental shared words and only add noise to paraphrased questions (bench/README.md).
LEXICAL_STRONG = 2.0
LEXICAL_COVERAGE = 0.6
# NLTK's 179 English function words (bm25s's "en" has Lucene's 33): a question's "which", "am",
# "my" or "should" is not a word of its meaning, and a rare one in the memories ("5 am") made a
# strong match of its own.
_COVERAGE_CHECKED = 64


@cache
def _stopwords() -> list[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return list(STOPWORDS_EN_PLUS)


def tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    tokens: list[list[str]] = bm25s.tokenize(
        texts, stopwords=_stopwords(), return_ids=False, show_progress=False
    )
    return tokens


class LexicalIndex:
    """BM25 over the memories' contents."""

    def __init__(self, contents: Sequence[str], tokens: list[list[str]] | None = None) -> None:
        """``tokens``: the contents already tokenized (``tokenize``), one list per content."""
        self.size = len(contents) if tokens is None else len(tokens)
        self._bm25: bm25s.BM25 | None = None
        self._terms: list[frozenset[str]] = []
        if tokens is None and contents:
            tokens = tokenize(list(contents))
        if tokens:
            import bm25s

            self._terms = [frozenset(t) for t in tokens]
            self._bm25 = bm25s.BM25()
            self._bm25.index(tokens, show_progress=False)

    @classmethod
    def from_tokens(cls, tokens: list[list[str]]) -> LexicalIndex:
        return cls((), tokens)

    def strong(self, query: str, raw: np.ndarray) -> np.ndarray:
        """Matches strong enough to count on their own: BM25 >= ``LEXICAL_STRONG``, or most of
        the query's terms (``LEXICAL_COVERAGE``) present, which small collections need (their
        IDF is low, so even an exact id scores little)."""
        strong = raw >= LEXICAL_STRONG
        terms = set(tokenize([query])[0])
        if not terms:
            return strong
        weaker = np.flatnonzero((raw > 0) & ~strong)
        if weaker.size > _COVERAGE_CHECKED:  # only the best BM25 matches can cover the query
            weaker = weaker[
                np.argpartition(-raw[weaker], _COVERAGE_CHECKED - 1)[:_COVERAGE_CHECKED]
            ]
        for i in weaker:
            strong[i] = len(terms & self._terms[i]) / len(terms) >= LEXICAL_COVERAGE
        return strong

    def raw(self, query: str) -> np.ndarray:
        if self._bm25 is None:
            return np.zeros(self.size)
        vocab = self._bm25.vocab_dict
        terms = [t for t in tokenize([query])[0] if t in vocab]
        if not terms:
            return np.zeros(self.size)
        return np.asarray(self._bm25.get_scores(terms), dtype=float)

    def similarities(self, query: str) -> np.ndarray:
        raw = self.raw(query)
        return np.asarray(raw / (raw + 1.0))
