"""The cache-aware fit's policy: deployment defaults (settings) overridden per request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from app.core.settings import Settings
from app.protocol.chat import CacheOptions

__all__ = ["CachePolicy", "cache_policy"]

T = TypeVar("T")


def _pick(value: T | None, default: T) -> T:
    return default if value is None else value


@dataclass(frozen=True, slots=True)
class CachePolicy:
    enabled: bool = True
    high_water_ratio: float = 0.75
    low_water_ratio: float = 0.3
    keep_tool_results: int = 2
    clear_at_least_tokens: int = 4000
    exclude_tools: frozenset[str] = field(default_factory=frozenset)
    cache_hints: bool = True
    # The high-water mark is a share of the room left beside what every call sends (system
    # prompts, tools); a ratio the request gives (or Anthropic's ``trigger``) is taken as
    # written: a share of the whole budget.
    high_water_of_room: bool = True


def cache_policy(
    settings: Settings, options: CacheOptions, model: CacheOptions | None = None
) -> CachePolicy:
    """The request's ``context.cache`` over the model's (its ``model_list`` entry's
    ``model_info.context_cache``) over the deployment's settings. ``exclude_tools`` is the
    union of all three: a request can protect more tools, never unprotect the operator's."""
    model = model or CacheOptions()
    exclude = {
        *settings.cache_exclude_tools,
        *(model.exclude_tools or ()),
        *(options.exclude_tools or ()),
    }
    return CachePolicy(
        enabled=_pick(options.enabled, _pick(model.enabled, settings.cache_enabled)),
        high_water_ratio=_pick(
            options.high_water_ratio,
            _pick(model.high_water_ratio, settings.cache_high_water_ratio),
        ),
        low_water_ratio=_pick(
            options.low_water_ratio, _pick(model.low_water_ratio, settings.cache_low_water_ratio)
        ),
        keep_tool_results=_pick(
            options.keep_tool_results,
            _pick(model.keep_tool_results, settings.cache_keep_tool_results),
        ),
        clear_at_least_tokens=_pick(
            options.clear_at_least_tokens,
            _pick(model.clear_at_least_tokens, settings.cache_clear_at_least_tokens),
        ),
        exclude_tools=frozenset(exclude),
        cache_hints=_pick(options.cache_hints, _pick(model.cache_hints, settings.cache_hints)),
        high_water_of_room=options.high_water_ratio is None,
    )
