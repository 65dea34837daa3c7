"""The bulk ranks reader returns exactly what tiktoken's own parser does, and hands any file
it does not expect back to that parser (its result, its errors)."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

import app.tokens.counter  # noqa: F401  (installs the reader)
from app.tokens.ranks import load_ranks

CL100K = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
O200K = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


@pytest.mark.parametrize("url", [CL100K, O200K])
def test_same_ranks_as_tiktoken_for_the_bundled_files(url: str) -> None:
    expected = tiktoken.load.load_tiktoken_bpe(url)
    got = load_ranks(url)
    assert got == expected
    assert list(got) == list(expected)  # same insertion order too


def test_bundled_encodings_read_their_ranks_with_it() -> None:
    assert openai_public.load_tiktoken_bpe is load_ranks
    encoding = tiktoken.get_encoding("cl100k_base")
    reference = tiktoken.Encoding(  # the same tokenizer, from tiktoken's own parser
        name="reference",
        pat_str=encoding._pat_str,
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(CL100K),
        special_tokens=encoding._special_tokens,
    )
    text = "def fit(prompt):\n    return 42  # héllo, 東京 🙂\n" * 50
    assert encoding.encode(text) == reference.encode(text)
    assert len(encoding.encode(text)) > 500


def _cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, contents: bytes) -> str:
    """A ranks file at a made-up address, found in a tiktoken cache directory."""
    url = "https://example.invalid/test.tiktoken"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(contents)
    return url


def _line(token: bytes, rank: int) -> bytes:
    return base64.b64encode(token) + b" " + str(rank).encode()


@pytest.mark.parametrize(
    "contents",
    [
        b"\n".join(_line(bytes([i]), i) for i in range(5)) + b"\n",
        b"\n".join(_line(bytes([i]), i) for i in range(5)),  # no final newline
        b"\r\n".join(_line(bytes([i]), i) for i in range(5)) + b"\r\n",
        _line(b"a", 0) + b"\n\n" + _line(b"b", 1) + b"\n",  # a blank line: tiktoken's parser
        b"",
    ],
)
def test_matches_tiktoken_on_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, contents: bytes
) -> None:
    url = _cached(tmp_path, monkeypatch, contents)
    assert load_ranks(url) == tiktoken.load.load_tiktoken_bpe(url)


@pytest.mark.parametrize(
    "contents",
    [
        _line(b"a", 0) + b" extra\n",  # a stray field
        _line(b"a", 0) + b"\n" + base64.b64encode(b"b") + b" one\n",  # a rank not a number
        b"YQ 0\nYg 1\n",  # base64 without its padding
    ],
)
def test_malformed_files_fail_as_tiktoken_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, contents: bytes
) -> None:
    url = _cached(tmp_path, monkeypatch, contents)
    with pytest.raises(ValueError, match="Error parsing line") as theirs:
        tiktoken.load.load_tiktoken_bpe(url)
    with pytest.raises(ValueError, match="Error parsing line") as ours:
        load_ranks(url)
    assert str(ours.value) == str(theirs.value)


def test_the_hash_is_still_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached file that does not match its hash is not used (tiktoken then fetches it, which
    fails here: no network)."""
    url = _cached(tmp_path, monkeypatch, _line(b"a", 0) + b"\n")
    monkeypatch.setattr(tiktoken.load, "read_file", _refuse)
    with pytest.raises(OSError, match="no network"):
        load_ranks(url, expected_hash="0" * 64)
    assert not os.listdir(tmp_path)  # tiktoken removed the mismatched file


def _refuse(blobpath: str) -> bytes:
    raise OSError(f"no network for {blobpath}")
