"""Which model does what for one request: primary (request), planner and summarizer (settings,
overridable per request), embeddings (settings)."""

from __future__ import annotations

from dataclasses import dataclass

from app.llm.model_info import ModelInfo

__all__ = ["ModelConfig", "is_expensive"]


def is_expensive(info: ModelInfo, threshold_per_token: float) -> bool:
    """True when litellm's cost map prices input at or above the threshold; False if unknown."""
    return info.known and info.input_cost_per_token >= threshold_per_token > 0


@dataclass(frozen=True, slots=True)
class ModelConfig:
    primary: str
    planner: str
    summarizer: str
    embedding: str | None
    primary_info: ModelInfo
    expensive_threshold: float

    def is_expensive_primary(self) -> bool:
        return is_expensive(self.primary_info, self.expensive_threshold)
