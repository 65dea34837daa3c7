"""Which litellm model (and api_base, api_key, …) serves a model name.

Three modes, as the contract says: a LiteLLM-style ``model_list`` YAML; one OpenAI-compatible
upstream for every name not in that list (sent as ``openai/<name>``); or plain pass-through of
the name to litellm, which then reads provider keys from the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from pydantic import ValidationError

from app.core.errors import NotFound
from app.protocol.chat import CacheOptions
from app.wire.json import JSONObject

__all__ = [
    "ConfigError",
    "Deployment",
    "ModelInfoFields",
    "ModelRouter",
    "is_anthropic",
    "load_model_list",
]


class ModelInfoFields(TypedDict, total=False):
    """The fields contextgate reads of an entry of litellm's model map, and of a deployment's
    ``model_info`` in the model_list (which overrides them; other keys pass unread). A config's
    YAML reads a rate such as ``1e-6`` as a string: rates are read with ``float()``."""

    max_input_tokens: int | None
    max_tokens: int | None
    max_output_tokens: int | None
    input_cost_per_token: float | str
    output_cost_per_token: float | str
    supports_response_schema: bool
    supports_reasoning: bool
    base_model: str
    responses_api: bool
    context_cache: JSONObject


class ConfigError(Exception):
    """The model_list file cannot be used; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class Deployment:
    """One way to reach a model: the litellm model string and the call parameters."""

    model_name: str
    litellm_model: str
    # litellm_params as the config gives them (api_base, api_key, …): passed on to the call.
    params: dict[str, object] = field(default_factory=dict)
    model_info: ModelInfoFields = field(default_factory=lambda: ModelInfoFields())
    # ``model_info.context_cache``: this deployment's cache-aware fit policy, the fields of a
    # request's ``context.cache`` (the request's own win; app/context/cache_policy.py).
    cache: CacheOptions | None = None

    @property
    def cost_key(self) -> str:
        """The name to look up in litellm's cost map."""
        return str(self.model_info.get("base_model") or self.litellm_model)


def is_anthropic(deployment: Deployment) -> bool:
    """Whether litellm reaches this deployment with its anthropic provider."""
    provider = deployment.params.get("custom_llm_provider")
    if provider is not None:
        return bool(provider == "anthropic")
    return deployment.litellm_model.startswith("anthropic/")


def _resolve_secret(value: object) -> object:
    if isinstance(value, str) and value.startswith("os.environ/"):
        name = value.removeprefix("os.environ/")
        resolved = os.environ.get(name)
        if resolved is None:
            raise ConfigError(f"environment variable {name} (referenced as {value}) is not set")
        return resolved
    return value


def _cache_options(path: Path, index: int, raw: object) -> CacheOptions | None:
    if raw is None:
        return None
    try:
        return CacheOptions.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(
            f"{path}: model_list[{index}].model_info.context_cache: {problems}"
        ) from None


def load_model_list(path: Path) -> tuple[list[Deployment], dict[str, list[str]]]:
    """Read deployments and fallbacks (``router_settings.fallbacks`` or top-level)."""
    import yaml  # only with a config file: ~1.5 MB a server without one does without

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("model_list", []), list):
        raise ConfigError(f"{path}: expected a mapping with a 'model_list' list")
    deployments: list[Deployment] = []
    for index, entry in enumerate(raw.get("model_list") or []):
        if not isinstance(entry, dict) or "model_name" not in entry:
            raise ConfigError(f"{path}: model_list[{index}] needs 'model_name'")
        params = dict(entry.get("litellm_params") or {})
        if "model" not in params:
            raise ConfigError(f"{path}: model_list[{index}].litellm_params needs 'model'")
        litellm_model = str(params.pop("model"))
        params = {key: _resolve_secret(value) for key, value in params.items()}
        # The YAML's mapping as it is: the fields are read with the care ModelInfoFields says.
        model_info = cast(ModelInfoFields, dict(entry.get("model_info") or {}))
        deployments.append(
            Deployment(
                model_name=str(entry["model_name"]),
                litellm_model=litellm_model,
                params=params,
                model_info=model_info,
                cache=_cache_options(path, index, model_info.get("context_cache")),
            )
        )
    fallbacks: dict[str, list[str]] = {}
    router_settings = raw.get("router_settings") or {}
    for item in router_settings.get("fallbacks") or raw.get("fallbacks") or []:
        if isinstance(item, dict):
            for name, targets in item.items():
                fallbacks[str(name)] = [str(target) for target in targets]
    return deployments, fallbacks


class ModelRouter:
    def __init__(
        self,
        deployments: list[Deployment] | None = None,
        *,
        fallbacks: dict[str, list[str]] | None = None,
        upstream_base_url: str | None = None,
        upstream_api_key: str | None = None,
    ) -> None:
        self._by_name: dict[str, list[Deployment]] = {}
        for deployment in deployments or []:
            self._by_name.setdefault(deployment.model_name, []).append(deployment)
        self._fallbacks = fallbacks or {}
        self._upstream_base_url = upstream_base_url
        self._upstream_api_key = upstream_api_key
        self._cursor: dict[str, int] = {}

    @property
    def upstream_base_url(self) -> str | None:
        return self._upstream_base_url

    @property
    def upstream_api_key(self) -> str | None:
        return self._upstream_api_key

    def configured_names(self) -> list[str]:
        return list(self._by_name)

    def deployments(self) -> list[Deployment]:
        """Every configured deployment (not the pass-through or upstream ones made per name)."""
        return [deployment for group in self._by_name.values() for deployment in group]

    def _direct(self, model_name: str) -> list[Deployment]:
        configured = self._by_name.get(model_name)
        if configured:
            # Several deployments of one name share the load, round-robin.
            start = self._cursor.get(model_name, 0) % len(configured)
            self._cursor[model_name] = start + 1
            return configured[start:] + configured[:start]
        if self._upstream_base_url:
            params: dict[str, object] = {
                "api_base": self._upstream_base_url,
                # OpenAI-compatible servers without auth still need some key from the SDK.
                "api_key": self._upstream_api_key or "sk-contextgate-no-key",
            }
            return [Deployment(model_name, f"openai/{model_name}", params)]
        return [Deployment(model_name, model_name)]

    def primary(self, model_name: str) -> Deployment:
        """The first deployment of a name, without advancing the round-robin."""
        configured = self._by_name.get(model_name)
        return configured[0] if configured else self._direct(model_name)[0]

    def find(self, model_name: str) -> Deployment | None:
        """``primary``, or None when no route serves the name (the call itself will say)."""
        try:
            return self.primary(model_name)
        except NotFound:
            return None

    def serves(self, model_name: str) -> bool:
        """False only for a name outside the model_list when no upstream takes the others
        (in pass-through mode litellm decides, see ``not_served``)."""
        return bool(model_name in self._by_name or self._upstream_base_url or not self._by_name)

    def not_served(self, model_name: str, detail: str | None = None) -> NotFound:
        """404 ``model_not_found`` whose message lists what this server does serve."""
        names = ", ".join(self.configured_names())
        if self._upstream_base_url:
            served = (
                f"{names + ' and ' if names else ''}the models the upstream serves "
                "(GET /v1/models lists them)"
            )
        elif names:
            served = names
        else:
            served = (
                "any model litellm knows, named with its provider (e.g. openai/gpt-4o-mini), "
                "whose key is set; CONTEXTGATE_CONFIG or CONTEXTGATE_UPSTREAM_BASE_URL serve others"
            )
        message = f"The model '{model_name}' is not served here. Served models: {served}."
        if detail:
            message += f" ({detail})"
        return NotFound(message, code="model_not_found", param="model")

    def candidates(self, model_name: str) -> list[Deployment]:
        """Every deployment ``resolve`` may try for the name (its fallbacks' included), without
        advancing the round-robin; empty when the name is not served."""
        if not self.serves(model_name):
            return []
        found: list[Deployment] = []
        for name in (model_name, *self._fallbacks.get(model_name, [])):
            if self.serves(name):
                found.extend(self._by_name.get(name) or [self.primary(name)])
        return found

    def resolve(self, model_name: str) -> list[Deployment]:
        """Deployments to try in order: this name's, then its configured fallbacks'."""
        if not self.serves(model_name):
            raise self.not_served(model_name)
        chain = self._direct(model_name)
        for fallback in self._fallbacks.get(model_name, []):
            if self.serves(fallback):
                chain.extend(self._direct(fallback))
        return chain
