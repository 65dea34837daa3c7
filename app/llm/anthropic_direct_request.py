"""A chat-form request as Anthropic's Messages API body: litellm's translation, reproduced.

The direct Anthropic path (app/llm/anthropic_direct.py) sends what litellm's anthropic provider
(``AnthropicConfig.map_openai_params`` and ``transform_request``) would send for the same
messages and parameters, equal once parsed: the messages as anthropic_direct_messages.py
translates them, tools with ``type: "custom"`` and litellm's ``input_schema``, ``tool_choice``,
``stop_sequences``, ``metadata.user_id``, ``thinking`` and litellm's default ``max_tokens``; and
the ``anthropic-beta`` header as litellm filters it. Only the shapes contextgate's doors produce
are translated here; anything else (a mid-conversation system message, a file part, a hosted
tool, an unknown parameter, a model whose capabilities change litellm's translation…) raises
:class:`Unsupported` and the call goes through litellm as before: nothing is ever translated
differently.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

import orjson

from app.llm.anthropic_direct_messages import Unsupported, conversation, system_blocks
from app.llm.model_info import model_cost_map
from app.wire.json import JSONObject

__all__ = ["Unsupported", "anthropic_body", "beta_header", "model_supported"]

# Parameters translated here (the rest, and any control parameter, go through litellm).
_PARAMS = frozenset(
    {
        "max_tokens",
        "max_completion_tokens",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stop",
        "temperature",
        "top_p",
        "top_k",
        "user",
        "thinking",
    }
)
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_SCHEMA_KEYS = ("type", "properties", "additionalProperties", "required", "$defs", "strict")
_EMAIL = re.compile(r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$")
_PHONE = re.compile(r"^\+?[\d\s\(\)-]{7,}$")
# Model names litellm treats as without sampling parameters when its map does not say.
_NO_SAMPLING = ("fable", "opus-4-7", "opus_4_7", "opus-4.7", "opus_4.7", "opus-4-8", "opus_4_8")
# Capabilities that make litellm translate differently: such models go through litellm.
_CAPABILITIES = (
    "supports_adaptive_thinking",
    "thinking_always_on",
    "supports_legacy_thinking",
    "supports_mid_conversation_system",
)


def _env_int(name: str, default: int) -> int:
    return int(os.getenv(name, default))


def model_supported(model: str) -> bool:
    """Whether litellm's translation for ``model`` (the name without ``anthropic/``) is the plain
    one reproduced here: the model is in litellm's map with its own output limit, and none of
    the capabilities that change the translation (adaptive or always-on thinking, no sampling
    parameters, no forced tool use) apply."""
    entry = model_cost_map().get(model)
    if not isinstance(entry, dict):
        return False
    if entry.get("max_output_tokens") is None and entry.get("max_tokens") is None:
        return False
    if any(entry.get(key) for key in _CAPABILITIES):
        return False
    if entry.get("supports_sampling_params") is False:
        return False
    if entry.get("supports_forced_tool_use") is False:
        return False
    lowered = model.lower()
    return not any(part in lowered for part in _NO_SAMPLING)


def _max_tokens_default(model: str) -> int:
    entry = cast(Mapping[str, Any], model_cost_map()[model])
    if "max_output_tokens" in entry:
        return int(entry["max_output_tokens"])
    return int(entry["max_tokens"])


# ---- parameters --------------------------------------------------------------------------


def _tool(tool: object) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise Unsupported("a tool that is not a function")
    if not set(tool) <= {"type", "function", "cache_control"}:
        raise Unsupported("a tool with fields litellm reads")
    function = tool.get("function")
    if not isinstance(function, dict) or not set(function) <= {
        "name",
        "description",
        "parameters",
        "cache_control",
    }:
        raise Unsupported("a function with fields litellm reads")
    name = function.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name):
        raise Unsupported("a tool name litellm rewrites")
    schema = function.get("parameters", {"type": "object", "properties": {}})
    if schema is not None and not isinstance(schema, dict):
        raise Unsupported("parameters that are not an object")
    normalized = dict(schema) if schema else {}
    if normalized.get("type") != "object":
        normalized["type"] = "object"
    if "properties" not in normalized:
        normalized["properties"] = {}
    components = normalized.get("components")
    if "definitions" in normalized or (
        isinstance(components, dict) and isinstance(components.get("schemas"), Mapping)
    ):
        raise Unsupported("a schema with legacy definitions")
    translated: dict[str, Any] = {
        "name": name,
        "input_schema": {key: normalized[key] for key in _SCHEMA_KEYS if key in normalized},
        "type": "custom",
    }
    if function.get("description") is not None:
        translated["description"] = function["description"]
    if tool.get("cache_control") is not None:
        translated["cache_control"] = tool["cache_control"]
    elif isinstance(function.get("cache_control"), dict):
        translated["cache_control"] = dict(function["cache_control"])
    return translated


def _tool_choice(choice: object, parallel: object) -> dict[str, Any] | None:
    translated: dict[str, Any] | None = None
    if choice == "auto":
        translated = {"type": "auto"}
    elif choice == "required":
        translated = {"type": "any"}
    elif choice == "none":
        translated = {"type": "none"}
    elif isinstance(choice, dict):
        if "type" in choice and "function" not in choice:
            kind = choice.get("type")
            if kind == "auto":
                translated = {"type": "auto"}
            elif kind in ("required", "any"):
                translated = {"type": "any"}
            elif kind == "none":
                translated = {"type": "none"}
        else:
            name = (choice.get("function") or {}).get("name")
            if name is not None:
                translated = {"type": "tool", "name": name}
    elif choice is not None:
        raise Unsupported("a tool_choice litellm does not read")
    if parallel is not None:
        if choice == "none":
            pass
        elif translated is not None:
            translated["disable_parallel_tool_use"] = not parallel
        else:
            translated = {"type": "auto", "disable_parallel_tool_use": not parallel}
    return translated


def _stop(stop: object) -> list[str] | None:
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list):
        if not all(isinstance(s, str) for s in stop):
            raise Unsupported("stop sequences that are not strings")
        return list(stop) or None
    return None


def _user_id(user: str) -> bool:
    return not (_EMAIL.match(user) or _PHONE.match(user))


def _params(
    model: str, params: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """litellm's ``map_openai_params`` and the defaults ``transform_request`` adds."""
    # litellm reads only the parameters that differ from its defaults (all None).
    params = {name: value for name, value in params.items() if value is not None}
    unknown = set(params) - _PARAMS
    if unknown:
        raise Unsupported(f"parameters {sorted(unknown)}")
    out: dict[str, Any] = {}
    for name, value in params.items():
        if name in ("max_tokens", "max_completion_tokens"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise Unsupported("a max_tokens that is not a number")
            out["max_tokens"] = value if isinstance(value, int) else max(1, int(round(value)))
        elif name == "tools":
            if not isinstance(value, list):
                raise Unsupported("tools that are not a list")
            tools = [_tool(tool) for tool in value]
            names = [tool["name"] for tool in tools]
            if len(set(names)) != len(names):
                raise Unsupported("two tools of one name")
            out["tools"] = tools
        elif name in ("tool_choice", "parallel_tool_calls"):
            choice = _tool_choice(params.get("tool_choice"), params.get("parallel_tool_calls"))
            if choice is not None:
                out["tool_choice"] = choice
        elif name == "stop":
            stop = _stop(value)
            if stop is not None:
                out["stop_sequences"] = stop
        elif name in ("temperature", "top_p"):
            out[name] = value
        elif name == "user":
            if isinstance(value, str) and _user_id(value):
                out["metadata"] = {"user_id": value}
        elif name == "thinking":
            if not isinstance(value, dict) or not set(value) <= {"type", "budget_tokens"}:
                raise Unsupported("a thinking parameter litellm translates")
            if value.get("type") not in ("enabled", "disabled"):
                raise Unsupported("a thinking type litellm translates")
            out["thinking"] = dict(value)
    thinking = out.get("thinking")
    if (
        isinstance(thinking, dict)
        and thinking.get("type") == "enabled"
        and "max_tokens" not in params
        and "max_completion_tokens" not in params
        and thinking.get("budget_tokens") is not None
    ):
        out["max_tokens"] = thinking["budget_tokens"] + _env_int("DEFAULT_MAX_TOKENS", 4096)
    if "tools" not in out and any(m.get("tool_calls") is not None for m in messages):
        raise Unsupported("tool calls without tools (litellm adds a dummy tool)")
    if "max_tokens" not in out:
        out["max_tokens"] = _max_tokens_default(model)
    if "top_k" in params and params["top_k"] is not None:
        out["top_k"] = params["top_k"]
    return out


def anthropic_body(
    model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
) -> JSONObject:
    """The Messages API body litellm sends for ``messages`` and ``params`` to ``model``."""
    leading = 0
    while leading < len(messages) and messages[leading].get("role") == "system":
        leading += 1
    system = system_blocks(messages[:leading])
    translated = conversation(messages[leading:])
    body: dict[str, Any] = {"model": model, "messages": translated}
    body.update(_params(model, params, messages))
    if system:
        body["system"] = system
    return body


_BETAS_CACHE: dict[str, str | None] = {}


def _known_betas() -> Mapping[str, object]:
    from importlib.resources import files

    data = orjson.loads(
        files("litellm").joinpath("anthropic_beta_headers_config.json").read_bytes()
    )
    return cast(Mapping[str, object], data.get("anthropic") or {})


_KNOWN: list[Mapping[str, object]] = []


def beta_header(value: str | None) -> str | None:
    """The ``anthropic-beta`` litellm sends for the client's: the betas its bundled table knows
    for Anthropic, mapped, sorted, without duplicates (None: no header)."""
    if value is None:
        return None
    cached = _BETAS_CACHE.get(value, "")
    if cached != "":
        return cached
    if not _KNOWN:
        _KNOWN.append(_known_betas())
    known = _KNOWN[0]
    kept: set[str] = set()
    for beta in value.split(","):
        beta = beta.strip()
        if not beta or beta not in known or known[beta] is None:
            continue
        kept.add(str(known[beta]))
    header = ",".join(sorted(kept)) if kept else None
    if len(_BETAS_CACHE) > 256:
        _BETAS_CACHE.clear()
    _BETAS_CACHE[value] = header
    return header
