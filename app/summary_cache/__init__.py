"""The summary cache and its backends (in-process LRU, Redis)."""

from app.summary_cache.backends import CacheBackend, InProcessBackend, RedisBackend
from app.summary_cache.summary import CachedSummary, SummaryCache, summary_key

__all__ = [
    "CacheBackend",
    "CachedSummary",
    "InProcessBackend",
    "RedisBackend",
    "SummaryCache",
    "summary_key",
]
