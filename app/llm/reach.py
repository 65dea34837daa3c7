"""Whether a model name has a route here, and what the helper models fall back to.

A name has a route when it is in the ``model_list``, when an upstream
(``CONTEXTGATE_UPSTREAM_BASE_URL``) takes every name, or, with neither configured, when
litellm knows its provider and the provider's key is in the environment. With a
``model_list`` and no upstream, only the listed names are served.

The planner and summarizer models (``CONTEXTGATE_PLANNER_MODEL``/``_SUMMARIZER_MODEL``) are
checked once at start: one without a route is replaced by the request's own model (logged once,
and said in every ``context_utilization.notes``); an embedding model without a route is
replaced by the embedded embedder (``HelperModels.embedding`` is then None).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.core.settings import Settings
    from app.llm.routing import ModelRouter

__all__ = [
    "PROVIDER_KEY_VARIABLES",
    "HelperModels",
    "HelperSource",
    "credentials_problem",
    "helper_models",
    "route_problem",
]

logger = logging.getLogger(__name__)

# Environment variables through which litellm reaches a hosted provider. With none of them, no
# upstream and no model_list, no request can be answered.
PROVIDER_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AZURE_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "VERTEXAI_PROJECT",
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "COHERE_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHERAI_API_KEY",
    "FIREWORKS_AI_API_KEY",
    "PERPLEXITYAI_API_KEY",
    "HUGGINGFACE_API_KEY",
    "OLLAMA_API_BASE",
)
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET")


def credentials_problem(litellm_model: str, api_key: object = None) -> str | None:
    """Why litellm cannot call ``litellm_model`` (unknown provider, missing key), or None."""
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List" banner on stdout
    try:
        litellm.get_llm_provider(litellm_model)
    except Exception:
        return f"litellm knows no provider for '{litellm_model}'"
    if api_key:
        return None
    try:
        found = litellm.validate_environment(model=litellm_model)
    except Exception:
        return None  # litellm cannot tell; the call itself will
    missing = [
        str(name)
        for name in found.get("missing_keys") or []
        if any(word in str(name) for word in _SECRET_WORDS)
    ]
    if missing:
        return f"'{litellm_model}' needs {', '.join(missing)} in the environment"
    return None


def route_problem(router: ModelRouter, model_name: str) -> str | None:
    """Why ``model_name`` cannot be served here (one line), or None when it can."""
    if model_name in router.configured_names() or router.upstream_base_url:
        return None
    if router.deployments():
        return (
            f"'{model_name}' is not in the model_list (CONTEXTGATE_CONFIG) and no "
            "CONTEXTGATE_UPSTREAM_BASE_URL takes the other names"
        )
    if not any(os.environ.get(name) for name in PROVIDER_KEY_VARIABLES):
        return "no upstream, no model_list and no provider key in the environment"
    return credentials_problem(model_name)


@dataclass(frozen=True, slots=True)
class HelperModels:
    """The planner, summarizer and embedding models this server uses, checked at start."""

    planner: str
    summarizer: str
    embedding: str | None  # None: the embedded embedder (or BM25), not a routed model
    # "planner" / "summarizer" / "embedding" → the configured name and why it has no route.
    unroutable: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def check(cls, settings: Settings, router: ModelRouter) -> HelperModels:
        unroutable: dict[str, tuple[str, str]] = {}
        configured = {
            "planner": settings.planner_model,
            "summarizer": settings.summarizer_model,
            "embedding": settings.embedding_model,
        }
        for role, name in configured.items():
            if name is None:
                continue
            problem = route_problem(router, name)
            if problem is not None:
                unroutable[role] = (name, problem)
        return cls(
            planner=settings.planner_model,
            summarizer=settings.summarizer_model,
            embedding=None if "embedding" in unroutable else settings.embedding_model,
            unroutable=unroutable,
        )

    def planner_for(self, explicit: str | None, request_model: str) -> str:
        """The request's ``context.planner_model``, else the configured one if it has a route,
        else the request's own model."""
        if explicit:
            return explicit
        return request_model if "planner" in self.unroutable else self.planner

    def summarizer_for(self, explicit: str | None, request_model: str) -> str:
        if explicit:
            return explicit
        return request_model if "summarizer" in self.unroutable else self.summarizer

    def notes(self, request_model: str) -> list[str]:
        """What ``context_utilization.notes`` says about these fallbacks for one request."""
        notes = []
        for role, (name, _) in self.unroutable.items():
            instead = "the embedded embedder" if role == "embedding" else f"'{request_model}'"
            notes.append(f"{role} model '{name}' has no route here; {instead} used instead")
        return notes

    def log_fallbacks(self) -> None:
        """Once at start: which helper models fell back, why, and the fix."""
        for role, (name, problem) in self.unroutable.items():
            instead = "the embedded embedder" if role == "embedding" else "each request's model"
            logger.warning(
                f"{role} model has no route: {instead} is used instead",
                extra={
                    "model": name,
                    "reason": problem,
                    "fix": f"set CONTEXTGATE_{role.upper()}_MODEL to a served model, "
                    "or add it to the model_list",
                },
            )


class HelperSource(Protocol):
    """Where the checked helper models live (``app.state.AppState`` is one)."""

    settings: Settings
    helpers: HelperModels | None


def helper_models(state: HelperSource) -> HelperModels:
    """The state's checked helper models (as configured when the state was built by hand)."""
    if state.helpers is not None:
        return state.helpers
    settings = state.settings
    return HelperModels(settings.planner_model, settings.summarizer_model, settings.embedding_model)
