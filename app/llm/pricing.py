"""Price one response's usage with its prompt cache: reads, 5-minute and 1-hour writes.

Providers bill cached prompt tokens apart: Anthropic reads at ~0.1x the input price and writes at
1.25x (5 minutes) or 2x (1 hour); OpenAI and Gemini read at 0.1x-0.5x and do not charge writes.
The usage they report comes in three shapes, all read here:

- chat usage (OpenAI, and litellm's normalised form of every provider): ``prompt_tokens`` counts
  every input token, cached ones included; ``prompt_tokens_details.cached_tokens`` the reads;
  litellm adds ``cache_creation_tokens`` and ``cache_creation_token_details`` (5m / 1h) there,
  and ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` beside them;
- Anthropic's own: ``input_tokens`` counts only the uncached tokens, reads and writes apart,
  the write split in ``cache_creation: {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}``;
- Responses' own: ``input_tokens`` (all) and ``input_tokens_details.cached_tokens``; Gemini's
  ``cached_content_token_count`` (implicit hits, included in its prompt count).

The rates follow litellm's ``generic_cost_per_token`` (llm_cost_calc/utils.py), which the unit
tests check figure by figure: a missing cache-read or cache-write rate is the input rate, a
missing 1-hour rate the 5-minute one, and a prompt above a ``*_above_<N>k_tokens`` threshold is
priced at that tier's rates, cache included. contextgate does not call litellm's function: it
prices every call, on paths that never import litellm (app/llm/model_info.py says why).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["PromptCache", "Rates", "UsageCost", "add_usage", "price", "prompt_cache"]


@dataclass(frozen=True, slots=True)
class PromptCache:
    """A prompt's input tokens as the provider billed them."""

    prompt_tokens: int  # every input token: uncached + read + written
    read_tokens: int = 0
    write_tokens: int = 0  # every write, 5-minute and 1-hour
    write_1h_tokens: int = 0  # of which 1-hour

    @property
    def uncached_tokens(self) -> int:
        return max(self.prompt_tokens - self.read_tokens - self.write_tokens, 0)

    @property
    def write_5m_tokens(self) -> int:
        return self.write_tokens - self.write_1h_tokens


@dataclass(frozen=True, slots=True)
class UsageCost:
    """USD of one usage; ``prompt_cost`` includes the cache's reads and writes."""

    prompt_cost: float = 0.0
    completion_cost: float = 0.0
    cache_read_cost: float = 0.0
    cache_write_cost: float = 0.0
    cache: PromptCache = PromptCache(0)


def _int(value: object) -> int:
    if type(value) is int:  # the usual count: as below, without the union and bool checks
        return value
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _number(value: object) -> float | None:
    """A rate as a number; a config's YAML reads ``1e-6`` (no dot) as the string '1e-6'."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_NONE: Mapping[str, object] = {}


def _dict(value: object) -> Mapping[str, object]:
    if type(value) is dict:  # parsed JSON: as below, without the ABC check
        return value
    return value if isinstance(value, Mapping) else _NONE


# A usage with only these keys (vLLM's, llama.cpp's, Ollama's) has no cache to read.
_PLAIN = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})


def prompt_cache(usage: Mapping[str, object] | None) -> PromptCache:
    """The cache's share of a prompt, from usage in any of the shapes the module doc lists."""
    usage = usage or _NONE
    if _PLAIN.issuperset(usage):  # what the lines below make of it, in one step
        return PromptCache(max(_int(usage.get("prompt_tokens")), 0))
    details = _dict(usage.get("prompt_tokens_details"))
    input_details = _dict(usage.get("input_tokens_details"))
    split = _dict(usage.get("cache_creation")) or _dict(details.get("cache_creation_token_details"))
    read = _int(
        usage.get("cache_read_input_tokens")
        or details.get("cached_tokens")
        or input_details.get("cached_tokens")
        or usage.get("cached_content_token_count")
    )
    write = _int(
        usage.get("cache_creation_input_tokens")
        or details.get("cache_creation_tokens")
        or details.get("cache_write_tokens")
        or input_details.get("cache_write_tokens")
    )
    write_5m = _int(split.get("ephemeral_5m_input_tokens"))
    write_1h = _int(split.get("ephemeral_1h_input_tokens"))
    write = max(write, write_5m + write_1h)
    if "prompt_tokens" in usage:
        prompt = _int(usage.get("prompt_tokens"))
    elif "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
        prompt = _int(usage.get("input_tokens")) + read + write  # Anthropic's: input is uncached
    else:
        prompt = _int(usage.get("input_tokens") or usage.get("prompt_token_count"))
    return PromptCache(max(prompt, read + write), read, write, min(write_1h, write))


_TIERED = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
    "cache_creation_input_token_cost_above_1hr",
)
# A tier's key: one of the rates above, then ``_above_200k_tokens`` (no service-tier suffix).
_TIER_KEY = re.compile(rf"^(?:{'|'.join(_TIERED)})_above_(\d+)(k?)_tokens$")


def _tier(source: Mapping[str, float], label: str) -> dict[str, float]:
    """The rates a prompt-size tier sets (``<base>_above_<label>_tokens``)."""
    keys = {base: f"{base}_above_{label}_tokens" for base in _TIERED}
    return {base: source[key] for base, key in keys.items() if key in source}


@dataclass(frozen=True, slots=True)
class Rates:
    """A model's per-token prices, read once from its cost-map entry: the base rates, and the
    rates of each prompt-size tier (``*_above_<N>[k]_tokens``), thresholds ascending."""

    base: Mapping[str, float]
    tiers: tuple[tuple[int, Mapping[str, float]], ...] = ()
    source: Mapping[str, float] = field(default_factory=dict)  # every ``*cost*`` number

    @classmethod
    def of(cls, entry: Mapping[str, object]) -> Rates:
        numbers = {key: _number(value) for key, value in entry.items() if "cost" in key}
        source = {key: value for key, value in numbers.items() if value is not None}
        labels: dict[int, str] = {}
        for key in source:
            match = _TIER_KEY.match(key)
            if match:
                labels[int(match[1]) * (1000 if match[2] else 1)] = f"{match[1]}{match[2]}"
        tiers = tuple((threshold, _tier(source, labels[threshold])) for threshold in sorted(labels))
        return cls({key: source[key] for key in _TIERED if key in source}, tiers, source)

    def for_prompt(self, prompt_tokens: int) -> Mapping[str, float]:
        """The rates for a prompt of this size: every tier it passes (strictly, as litellm)
        overrides the rates it has, the others keep their base value."""
        if not self.tiers or prompt_tokens <= self.tiers[0][0]:
            return self.base  # no tier passed (read only)
        chosen = dict(self.base)
        for threshold, tier in self.tiers:
            if prompt_tokens > threshold:
                chosen.update(tier)
        return chosen


def price(rates: Rates, usage: Mapping[str, object] | None) -> UsageCost:
    """The cost of ``usage`` at a model's ``rates``."""
    usage = usage or {}
    cache = prompt_cache(usage)
    completion_tokens = _int(usage.get("completion_tokens") or usage.get("output_tokens"))
    rate = rates.for_prompt(cache.prompt_tokens)
    input_rate = rate.get("input_cost_per_token", 0.0)
    read_rate = rate.get("cache_read_input_token_cost", input_rate)
    write_rate = rate.get("cache_creation_input_token_cost", input_rate)
    write_1h_rate = rate.get("cache_creation_input_token_cost_above_1hr", write_rate)
    read_cost = cache.read_tokens * read_rate
    write_cost = cache.write_5m_tokens * write_rate + cache.write_1h_tokens * write_1h_rate
    return UsageCost(
        prompt_cost=cache.uncached_tokens * input_rate + read_cost + write_cost,
        completion_cost=completion_tokens * rate.get("output_cost_per_token", 0.0),
        cache_read_cost=read_cost,
        cache_write_cost=write_cost,
        cache=cache,
    )


def _add_into(total: dict[str, object], key: str, value: object) -> None:
    if isinstance(value, Mapping):
        inner = total.setdefault(key, {})
        if isinstance(inner, dict):
            for name, item in value.items():
                _add_into(inner, name, item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        total[key] = _int(total.get(key)) + int(value)


def add_usage(total: dict[str, object], usage: Mapping[str, object] | None) -> None:
    """Add one call's chat usage into ``total`` (several rounds of one turn), every count
    summed, the cache's details included, so that the sum is priced as the calls were."""
    for key, value in (usage or {}).items():
        _add_into(total, key, value)
