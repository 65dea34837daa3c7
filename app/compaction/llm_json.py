"""One JSON-mode call to the summarizer model, validated against a pydantic schema."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from app.core.errors import ContextGateError
from app.core.settings import Settings
from app.llm.client import LLMClient, RetryPolicy
from app.llm.responses import Usage

__all__ = ["Summarizer", "SummarizerFailed"]

M = TypeVar("M", bound=BaseModel)


class SummarizerFailed(Exception):
    """The summarizer or extractor failed or answered something unusable; nothing was stored."""


@dataclass(frozen=True, slots=True)
class Summarizer:
    """The summarizer's and extractor's calls: the one LLM client, with the summarizer's
    timeout and at most one retry (``CONTEXTGATE_MAX_RETRIES`` when lower)."""

    llm: LLMClient
    settings: Settings

    async def call_json(
        self,
        model: str,
        system: str,
        user: str,
        schema: type[M],
        *,
        on_usage: Callable[[Usage | None], None] | None = None,
    ) -> tuple[M, float]:
        """Ask ``model`` for a JSON object; returns it validated, and what the call cost.

        ``on_usage`` hears the call's token usage (also when the answer is unusable).
        """
        settings = self.settings
        try:
            completion = await self.llm.complete(
                model,
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                {"response_format": {"type": "json_object"}, "temperature": 0},
                timeout=settings.summarizer_timeout_s,
                retry=RetryPolicy(max_retries=min(1, settings.max_retries)),
            )
        except ContextGateError as exc:
            raise SummarizerFailed(f"{model} call failed: {exc.message[:200]}") from exc
        if on_usage is not None:
            on_usage(completion.usage)
        cost = completion.prompt_cost + completion.completion_cost
        text = completion.content.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            return schema.model_validate(orjson.loads(text)), cost
        except (orjson.JSONDecodeError, ValidationError) as exc:
            first = str(exc).splitlines()[0][:200]
            raise SummarizerFailed(f"{model} answered invalid JSON ({first})") from exc
