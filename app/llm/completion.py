"""What one upstream call gives back (``Completion``: the answer, its usage and its cost) and
how failed calls are tried again (``RetryPolicy``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from app.llm.responses import Usage
from app.llm.routing import Deployment
from app.wire.chat import ChatCompletion

__all__ = ["Completion", "RetryPolicy"]


@dataclass(slots=True)
class Completion:
    response: ChatCompletion
    usage: Usage | None
    deployment: Deployment
    prompt_cost: float = 0.0  # the provider's prompt cache included (its reads and writes)
    completion_cost: float = 0.0
    cache_read_cost: float = 0.0  # parts of prompt_cost
    cache_write_cost: float = 0.0

    @property
    def content(self) -> str:
        choices = self.response.get("choices") or []
        message = choices[0].get("message") if choices else None
        return str(message.get("content") or "") if message else ""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 2
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        base = self.backoff_s * (2**attempt)
        return float(min(self.max_backoff_s, base * (0.75 + random.random() / 2)))
