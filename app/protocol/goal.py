"""``context.goal``: what the answer is for (seed 001's ContextGoal).

The planner sees it beside the question, and the deterministic plan ranks artifacts against the
question and the goal's focus together. A bare string is shorthand for ``{"task": "…"}``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ContextGoal"]


class ContextGoal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=2000)  # e.g. "draft the Q3 board summary"
    focus: list[str] = Field(default_factory=list, max_length=20)  # topics, names that matter
    audience: str | None = Field(default=None, max_length=200)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: object) -> object:
        return {"task": value} if isinstance(value, str) else value

    def query_terms(self) -> str:
        """Text to rank artifacts with, beside the question."""
        return " ".join([self.task, *self.focus])

    def describe(self) -> str:
        """One line for the planner's prompt."""
        parts = [self.task.strip()]
        if self.focus:
            parts.append("focus: " + ", ".join(f.strip() for f in self.focus))
        if self.audience:
            parts.append(f"audience: {self.audience.strip()}")
        return "; ".join(parts)
