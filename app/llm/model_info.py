"""Context windows and prices from litellm's (bundled) model map, looked up once per model.

With the bundled map (``LITELLM_LOCAL_MODEL_COST_MAP=True``, contextgate's default) the JSON file
litellm ships is read directly, so that pricing never imports litellm (seconds of start-up and
~160 MiB); with a remote map, litellm's own loaded ``model_cost`` is used.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import cast

import orjson

from app.llm.pricing import Rates, UsageCost, price
from app.llm.routing import Deployment, ModelInfoFields

__all__ = ["ModelInfo", "model_cost_map", "model_info_for"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    max_input_tokens: int | None
    max_output_tokens: int | None
    input_cost_per_token: float
    output_cost_per_token: float
    supports_response_schema: bool
    known: bool
    # Every per-token rate of the entry (cache reads and writes, size tiers), read once.
    rates: Rates = field(default_factory=lambda: Rates({}))

    def cost(self, prompt_tokens: int, completion_tokens: int) -> tuple[float, float]:
        """Plain input and output prices (embeddings, and usage without a cache)."""
        return (
            prompt_tokens * self.input_cost_per_token,
            completion_tokens * self.output_cost_per_token,
        )

    def price(self, usage: Mapping[str, object] | None) -> UsageCost:
        """A response's usage priced with its prompt cache (app/llm/pricing.py)."""
        return price(self.rates, usage)


_UNKNOWN = ModelInfo(None, None, 0.0, 0.0, False, False)


_BUNDLED_MAP = "model_prices_and_context_window_backup.json"


CostMap = dict[str, ModelInfoFields]
"""litellm's model map: a model's entry by name (its other fields, unread, kept)."""


def _litellm_map() -> CostMap:
    import litellm

    cost_map: CostMap = litellm.model_cost
    return cost_map


@lru_cache(maxsize=1)
def model_cost_map() -> CostMap:
    local = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").lower() == "true"
    spec = importlib.util.find_spec("litellm")
    if "litellm" in sys.modules or not local or spec is None or spec.origin is None:
        return _litellm_map()
    try:
        data = orjson.loads((Path(spec.origin).parent / _BUNDLED_MAP).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return _litellm_map()
    # litellm's bundled copy of its map: read as litellm reads it.
    return cast(CostMap, data) if isinstance(data, dict) else _litellm_map()


@lru_cache(maxsize=1024)
def _litellm_info(model: str) -> ModelInfo:
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    cost_map = model_cost_map()
    for candidate in candidates:
        entry = cost_map.get(candidate)
        if entry is None:
            continue
        return ModelInfo(
            max_input_tokens=entry.get("max_input_tokens") or entry.get("max_tokens"),
            max_output_tokens=entry.get("max_output_tokens"),
            input_cost_per_token=float(entry.get("input_cost_per_token") or 0.0),
            output_cost_per_token=float(entry.get("output_cost_per_token") or 0.0),
            supports_response_schema=bool(entry.get("supports_response_schema")),
            known=True,
            rates=Rates.of(entry),
        )
    return _UNKNOWN


def model_info_for(deployment: Deployment) -> ModelInfo:
    """litellm's figures for the deployment, overridden by its config's ``model_info``."""
    base = _litellm_info(deployment.cost_key)
    overrides = deployment.model_info
    if not overrides:
        return base
    return ModelInfo(
        max_input_tokens=overrides.get("max_input_tokens", base.max_input_tokens),
        max_output_tokens=overrides.get("max_output_tokens", base.max_output_tokens),
        input_cost_per_token=float(
            overrides.get("input_cost_per_token", base.input_cost_per_token)
        ),
        output_cost_per_token=float(
            overrides.get("output_cost_per_token", base.output_cost_per_token)
        ),
        supports_response_schema=bool(
            overrides.get("supports_response_schema", base.supports_response_schema)
        ),
        known=base.known or bool(overrides),
        rates=Rates.of({**base.rates.source, **overrides}),
    )
