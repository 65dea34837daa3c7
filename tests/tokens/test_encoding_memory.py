"""The counter's tiktoken encodings do not keep the Python dict of their ranks (issue 26: ~9-15
MB for cl100k_base, more for o200k_base); they count, cut and pickle as tiktoken's own do."""

from __future__ import annotations

import pickle

import pytest
import tiktoken
import tiktoken.registry

from app.tokens.counter import TokenCounter

counter = TokenCounter()

TEXTS = [
    "hello world",
    "Ünïcödé, emoji 🚀 and CJK 漢字かな, tabs\tand\nnewlines",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": None}  # code\n" * 20,
    "<|endoftext|> is a special token written as text",
    "a" * 5000,
    " ".join(str(n) for n in range(2000)),
]


def _with_ranks(name: str) -> tiktoken.Encoding:
    """The same encoding built anew, outside the registry: it keeps its dict."""
    constructors = tiktoken.registry.ENCODING_CONSTRUCTORS
    assert constructors is not None
    return tiktoken.Encoding(**constructors[name]())


@pytest.mark.parametrize("model", ["gpt-4", "gpt-4o"])
def test_the_encoding_holds_no_ranks_and_counts_as_before(model: str) -> None:
    encoding = counter.encoding(model)
    assert "_mergeable_ranks" not in vars(encoding)
    reference = _with_ranks(encoding.name)
    assert "_mergeable_ranks" in vars(reference)
    for text in TEXTS:
        ids = encoding.encode(text, disallowed_special=())
        assert ids == reference.encode(text, disallowed_special=())
        assert counter.count_text(text, model) == len(ids)
        assert encoding.decode(ids) == text


def test_the_encoding_still_pickles() -> None:
    encoding = counter.encoding("gpt-4o")
    copy = pickle.loads(pickle.dumps(encoding))
    assert copy.name == encoding.name
    assert copy.encode(TEXTS[1]) == encoding.encode(TEXTS[1])
