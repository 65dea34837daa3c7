"""What a client may forward upstream: everything OpenAI's API knows, never litellm's controls.

litellm reads routing, credentials and cost overrides from the same keyword arguments as the
request fields. A client body carrying ``api_base`` would otherwise send our provider key to a
server of its choosing; ``input_cost_per_token`` would rewrite what it pays.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["strip_control_params"]

_CONTROL = frozenset(
    {
        "api_base",
        "base_url",
        "api_key",
        "api_version",
        "organization",
        "project",
        "custom_llm_provider",
        "deployment_id",
        "model_list",
        "fallbacks",
        "context_window_fallbacks",
        "num_retries",
        "max_retries",
        "timeout",
        "stream_timeout",
        "request_timeout",
        "client",
        "headers",
        "extra_headers",
        "extra_query",
        "extra_body",
        "input_cost_per_token",
        "output_cost_per_token",
        "input_cost_per_second",
        "output_cost_per_second",
        "mock_response",
        "mock_tool_calls",
        "mock_timeout",
        "proxy_server_request",
        "caching",
        "cache",
        "no-log",
        "acompletion",
        "max_parallel_requests",
        "retry_policy",
        "callbacks",
        "logger_fn",
        "base_model",
        "region_name",
        "api_type",
        "azure_ad_token",
        "azure_ad_token_provider",
        "vertex_credentials",
        "vertex_project",
        "vertex_location",
        "tenant_id",
        "client_id",
        "client_secret",
        "azure_username",
        "azure_password",
    }
)
_CONTROL_PREFIXES = ("litellm_", "aws_", "vertex_", "azure_", "_")


def strip_control_params(params: Mapping[str, object]) -> dict[str, object]:
    """``params`` without the keys that steer litellm instead of the model."""
    return {
        key: value
        for key, value in params.items()
        if key not in _CONTROL and not key.startswith(_CONTROL_PREFIXES)
    }
