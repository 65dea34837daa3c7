"""Build the SummaryCache the settings ask for: Redis when CONTEXTGATE_REDIS_URL is set."""

from __future__ import annotations

from app.core.settings import Settings
from app.summary_cache.backends import CacheBackend, InProcessBackend, RedisBackend
from app.summary_cache.summary import SummaryCache

__all__ = ["build_summary_cache"]


def build_summary_cache(settings: Settings) -> SummaryCache:
    backend: CacheBackend
    if settings.redis_url:
        backend = RedisBackend(settings.redis_url)
    else:
        backend = InProcessBackend(
            max_entries=settings.summary_cache_max_entries,
            max_bytes=settings.summary_cache_max_bytes,
        )
    return SummaryCache(
        backend,
        ttl_s=settings.summary_cache_ttl_s,
        lock_ttl_s=settings.artifact_summary_timeout_s,
    )
