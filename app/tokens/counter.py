"""Token counting with tiktoken, offline (see app.core.offline), one encoder per model.

Counting never holds the event loop for long. Large texts (``LARGE_TEXT_CHARS`` and more) are
counted ahead, in a small thread pool (tiktoken releases the GIL), by ``await
counter.precount_messages(...)`` / ``precount(...)``; the synchronous ``count_*`` calls the
context engine makes afterwards find them in a small cache. And the work is bounded: a long
text is encoded in chunks cut at whitespace, because tiktoken's BPE is quadratic in the length
of one unbroken run (8 MB of one repeated character took seconds; chunked, it is linear).

Counts are remembered by content: every text of ``REMEMBER_TEXT_CHARS`` and more is encoded
once and found again by its length and hash, whoever asks and however often. An agent resends
its whole history (100k-200k tokens) on every call, and the stages of a turn each count the
same tool results again: only what is new goes through the tokenizer (issue 26). Shorter
texts are remembered apart, in a small cache of their own that cannot push the long ones
out: a chat turn counts its user message and the previous answer again when it appends them
to the kept prompt, and even a short text costs ~20 us to encode amid a request's work (its
BPE tables out of the CPU's cache), against well under 1 us to find.

The encodings are tiktoken's registered ones, without the Python copy of their ranks
(``_release_ranks``): ~9-15 MB less memory for cl100k_base, more for o200k_base (issue 26).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import orjson
import tiktoken
import tiktoken.registry

from app.tokens import ranks

ranks.install()  # tokenizers built from their ranks files read in bulk (app/tokens/ranks.py)

__all__ = [
    "LARGE_TEXT_CHARS",
    "MESSAGE_OVERHEAD",
    "REPLY_PRIMER",
    "TokenCounter",
    "message_texts",
    "text_of",
    "warm_encodings",
]

# Per-message overhead of OpenAI's chat format (role and separators), and the reply primer.
MESSAGE_OVERHEAD = 4
REPLY_PRIMER = 3
IMAGE_TOKENS = 85


def text_of(content: object) -> str:
    """The text of a message's content: a string, or the text parts of a list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


@lru_cache(maxsize=256)
def _encoding_for(model: str) -> tiktoken.Encoding:
    return _release_ranks(_registered_encoding(model.rsplit("/", 1)[-1]))


def _registered_encoding(name: str) -> tiktoken.Encoding:
    try:
        return tiktoken.encoding_for_model(name)
    except KeyError:
        pass
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")):
        return tiktoken.get_encoding("o200k_base")
    return tiktoken.get_encoding(FALLBACK_ENCODING)


FALLBACK_ENCODING = "cl100k_base"


def _release_ranks(encoding: tiktoken.Encoding) -> tiktoken.Encoding:
    """Drop the dict of byte sequences to ranks (100k entries in cl100k_base, 200k in
    o200k_base) that a tiktoken ``Encoding`` keeps after building its Rust ``CoreBPE`` from it.
    The ``CoreBPE`` holds its own copy and does all encoding and decoding; tiktoken reads the
    dict only to pickle an encoding by value (``__getstate__``), and an encoding of
    tiktoken's registry (every one here: ``get_encoding``'s) pickles by name instead, which
    needs no dict. Others are left as they are. The encodings are shared with whatever else
    in the process uses tiktoken (litellm): the same holds for them."""
    if tiktoken.registry.ENCODINGS.get(encoding.name) is encoding:
        encoding.__dict__.pop("_mergeable_ranks", None)
    return encoding


def warm_encodings(models: Iterable[str], *, fallback: bool = False) -> None:
    """Build the tokenizers these model names count with, now: tiktoken takes ~0.4 s to build
    o200k_base, which the first request would otherwise wait for. ``fallback``: also the one
    every other model counts with (cl100k_base)."""
    if fallback:
        _release_ranks(tiktoken.get_encoding(FALLBACK_ENCODING))
    for model in dict.fromkeys(models):
        _encoding_for(model)


# Texts this long are counted in the thread pool ahead of use (a few ms of encoding and more).
LARGE_TEXT_CHARS = 32 * 1024
# Chunk size of the bounded encoding: BPE on an unbroken run is quadratic in its length.
_CHUNK_CHARS = 4 * 1024
_CUT = re.compile(r"\s")
# Texts this long are remembered in the large cache; shorter ones in their own small one.
REMEMBER_TEXT_CHARS = 512
# ~100 bytes an entry: room for the messages of many agents' 150k-token histories.
_CACHE_ENTRIES = 32_768
# The short texts' own cache (the keys only, no text): the turns of a few thousand chats.
_SHORT_ENTRIES = 8_192
_POOL_WORKERS = 2
# A text as the caches know it: (encoding, length, hash); the text itself is not kept.
_Key = tuple[str, int, int]


def _encode_len(encoding: tiktoken.Encoding, text: str) -> int:
    return len(encoding.encode(text, disallowed_special=()))


def _chunked_count(encoding: tiktoken.Encoding, text: str) -> int:
    """Tokens of ``text`` encoded in chunks of about ``_CHUNK_CHARS``, each cut just before
    whitespace when there is some (so ordinary text counts as it would whole; an unbroken run
    may count a token or so more per chunk)."""
    total, start, size = 0, 0, len(text)
    while start < size:
        end = min(start + _CHUNK_CHARS, size)
        if end < size:
            window = text[start + _CHUNK_CHARS // 2 : end]
            cuts = [m.start() for m in _CUT.finditer(window)]
            if cuts:
                end = start + _CHUNK_CHARS // 2 + cuts[-1]
        total += _encode_len(encoding, text[start:end])
        start = end
    return total


def message_texts(message: Mapping[str, object]) -> list[str]:
    """The texts ``count_message`` encodes (content, name, tool calls as JSON)."""
    texts = [text_of(message.get("content"))]
    if message.get("name"):
        texts.append(str(message["name"]))
    if message.get("tool_calls"):
        texts.append(orjson.dumps(message["tool_calls"]).decode())
    return texts


class TokenCounter:
    """Counts tokens the way OpenAI bills chat messages; close enough for other providers."""

    def __init__(self, *, large_text_chars: int = LARGE_TEXT_CHARS) -> None:
        self.large_text_chars = large_text_chars
        self._cache: OrderedDict[_Key, int] = OrderedDict()
        self._short: OrderedDict[_Key, int] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        # What went through the tokenizer so far: texts and characters (tests and benchmarks
        # read them to check that a resent history is not encoded again).
        self.encoded_texts = 0
        self.encoded_chars = 0

    def encoding(self, model: str) -> tiktoken.Encoding:
        return _encoding_for(model)

    def count_text(self, text: str, model: str) -> int:
        if not text:
            return 0
        encoding = _encoding_for(model)
        key = (encoding.name, len(text), hash(text))
        short = len(text) < REMEMBER_TEXT_CHARS
        cached = self._found(self._short if short else self._cache, key)
        if cached is not None:
            return cached
        if not short:
            return self._count_large(key, encoding, text)
        self._note(text)
        count = _encode_len(encoding, text)
        self._keep(self._short, key, count, _SHORT_ENTRIES)
        return count

    def _note(self, text: str) -> None:
        self.encoded_texts += 1
        self.encoded_chars += len(text)

    def count_cached(self, text: str, model: str) -> int:
        """``count_text``, remembered whatever the text's length: for texts sent again on every
        call (an agent's tool definitions, the block frozen with a turn's user message)."""
        if not text:
            return 0
        key = (_encoding_for(model).name, len(text), hash(text))
        cached = self._found(self._cache, key)
        if cached is not None:
            return cached
        count = self.count_text(text, model)
        if len(text) < REMEMBER_TEXT_CHARS:
            self._keep(self._cache, key, count, _CACHE_ENTRIES)
        return count

    def _found(self, cache: OrderedDict[_Key, int], key: _Key) -> int | None:
        """The count ``cache`` remembers for ``key`` (now its most recently used), if any."""
        with self._lock:
            cached = cache.get(key)
            if cached is not None:
                cache.move_to_end(key)
            return cached

    def _keep(self, cache: OrderedDict[_Key, int], key: _Key, count: int, entries: int) -> None:
        """Remember ``count`` in ``cache``, the least recently used out past ``entries``."""
        with self._lock:
            cache[key] = count
            while len(cache) > entries:
                cache.popitem(last=False)

    def _count_large(self, key: _Key, encoding: tiktoken.Encoding, text: str) -> int:
        """Encode and remember a text of ``REMEMBER_TEXT_CHARS`` or more (whole below
        ``large_text_chars``, in chunks from there: the counts are those of before)."""
        self._note(text)
        if len(text) < self.large_text_chars:
            count = _encode_len(encoding, text)
        else:
            count = _chunked_count(encoding, text)
        self._keep(self._cache, key, count, _CACHE_ENTRIES)
        return count

    def upper_bound(self, text: str) -> int:
        """A cheap bound no tokenizer exceeds: every token covers at least one UTF-8 byte."""
        return len(text.encode("utf-8", "surrogatepass"))

    def is_counted(self, text: str, model: str) -> bool:
        """Whether ``count_text`` answers without encoding anything large on the caller's thread."""
        if len(text) < self.large_text_chars:
            return True
        key = (_encoding_for(model).name, len(text), hash(text))
        with self._lock:
            return key in self._cache

    async def precount(self, texts: Iterable[str], model: str) -> None:
        """Count the large ones among ``texts`` in the thread pool, for the sync calls after."""
        pending = [text for text in texts if not self.is_counted(text, model)]
        if not pending:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_POOL_WORKERS, thread_name_prefix="contextgate-tokens")
        loop = asyncio.get_running_loop()
        encoding = _encoding_for(model)
        await asyncio.gather(
            *(
                loop.run_in_executor(
                    self._pool,
                    self._count_large,
                    (encoding.name, len(text), hash(text)),
                    encoding,
                    text,
                )
                for text in dict.fromkeys(pending)
            )
        )

    async def precount_messages(self, messages: Iterable[Mapping[str, object]], model: str) -> None:
        await self.precount((t for m in messages for t in message_texts(m)), model)

    async def count_messages_async(
        self, messages: Sequence[Mapping[str, object]], model: str
    ) -> int:
        """``count_messages`` with the large texts counted off the event loop."""
        await self.precount_messages(messages, model)
        return self.count_messages(messages, model)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def count_message(self, message: Mapping[str, object], model: str) -> int:
        tokens = MESSAGE_OVERHEAD + self.count_text(text_of(message.get("content")), model)
        content = message.get("content")
        if isinstance(content, list):
            tokens += IMAGE_TOKENS * sum(
                1 for part in content if isinstance(part, dict) and part.get("type") == "image_url"
            )
        if message.get("name"):
            tokens += 1 + self.count_text(str(message["name"]), model)
        if message.get("tool_calls"):
            tokens += self.count_text(orjson.dumps(message["tool_calls"]).decode(), model)
        if message.get("tool_call_id"):
            tokens += 1
        return tokens

    def count_messages(self, messages: Sequence[Mapping[str, object]], model: str) -> int:
        return REPLY_PRIMER + sum(self.count_message(message, model) for message in messages)
