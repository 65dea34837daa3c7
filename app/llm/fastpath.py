"""Keep litellm's per-call overhead off the hot path (litellm still reaches every provider).

Measured with ``python -m bench.profile`` (see bench/README.md): for OpenAI-compatible
deployments litellm calls the OpenAI SDK, whose ``async_maybe_transform`` walks every message
of the request through its TypedDict annotations: ~0.15 ms of CPU per message, 40 ms for a
200-message conversation. The messages contextgate sends are already plain JSON (built from
JSON, stored as JSON), for which that walk is the identity; so the body is transformed without
them and they are put back as they are. Anything that is not plain JSON keeps the SDK's path.

litellm's own logging is off the hot path too: contextgate registers no litellm callbacks
(its request log and metrics record every call), yet by default litellm hands each call's
success handler, and each streamed chunk, to a thread pool. ``internal_call()`` marks the
current task's calls as litellm-internal (no logging work queued) and ``install()`` sets
``litellm.disable_streaming_logging``; litellm's own pricing of those calls is skipped too.

``install()`` is idempotent and fails soft: an SDK without these internals keeps its own path.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

__all__ = ["install", "internal_call", "is_plain_json"]

logger = logging.getLogger(__name__)
_PLAIN_SCALARS = (str, int, float, bool, type(None))
_installed = False


def is_plain_json(value: object, depth: int = 0) -> bool:
    """True for dict/list/str/number/bool/None trees (what json.loads returns)."""
    if isinstance(value, _PLAIN_SCALARS):
        return True
    if depth > 32:
        return False
    if type(value) is list:
        return all(is_plain_json(item, depth + 1) for item in value)
    if type(value) is dict:
        return all(
            type(key) is str and is_plain_json(item, depth + 1) for key, item in value.items()
        )
    return False


def _fast_transform(
    original: Callable[[object, object], Awaitable[object]], create_types: tuple[object, ...]
) -> Callable[[object, object], Awaitable[object]]:
    async def transform(data: object, expected_type: object) -> object:
        if (
            expected_type in create_types
            and type(data) is dict
            and type(data.get("messages")) is list
            and is_plain_json(data["messages"])
        ):
            rest = {key: value for key, value in data.items() if key != "messages"}
            result = await original(rest, expected_type)
            if type(result) is dict:
                result["messages"] = data["messages"]
                return result
        return await original(data, expected_type)

    transform.__contextgate_fast__ = True  # type: ignore[attr-defined]
    return transform


def internal_call() -> None:
    """Mark the current task's litellm calls as internal: no logging work handed to threads."""
    if _internal_flag is not None:
        _internal_flag.set(True)


def _internal_context() -> ContextVar[bool] | None:
    try:
        from litellm._internal_context import is_internal_call
    except ImportError:  # another litellm layout: its logging stays on
        return None
    return is_internal_call


_internal_flag: ContextVar[bool] | None = (
    None  # litellm's context variable, once install() has imported litellm
)


def _skip_litellm_pricing() -> None:
    """litellm prices every response (a cost-map lookup with regex fallbacks for unknown
    models: ~0.65 ms of CPU a call); contextgate prices usage itself (app/llm/model_info.py)
    and never reads litellm's figure, so for its own (internal-marked) calls it is skipped."""
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:
        return
    original = Logging.response_cost_calculator
    if getattr(original, "__contextgate_fast__", False) or _internal_flag is None:
        return
    flag = _internal_flag

    def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> Any:
        if flag.get():
            return None
        return original(self, *args, **kwargs)

    response_cost_calculator.__contextgate_fast__ = True  # type: ignore[attr-defined]
    Logging.response_cost_calculator = response_cost_calculator  # type: ignore[method-assign]


def install() -> bool:
    """Patch the OpenAI SDK's chat-completions body transform; True when in place."""
    global _installed, _internal_flag
    if _installed:
        return True
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm.disable_streaming_logging = True
    _internal_flag = _internal_context()
    _skip_litellm_pricing()
    try:
        from openai.resources.chat.completions import completions as module
        from openai.types.chat import completion_create_params as params

        original = getattr(module, "async_maybe_transform")  # noqa: B009  (not re-exported)
        create_types = (
            params.CompletionCreateParams,
            params.CompletionCreateParamsStreaming,
            params.CompletionCreateParamsNonStreaming,
        )
    except (ImportError, AttributeError):  # another SDK layout: keep its own path
        logger.info("openai SDK fast path not installed (unknown SDK layout)")
        return False
    if not getattr(original, "__contextgate_fast__", False):
        setattr(module, "async_maybe_transform", _fast_transform(original, create_types))  # noqa: B010
    _installed = True
    return True
