"""anthropic-version / anthropic-beta go on to Anthropic deployments only."""

from __future__ import annotations

from app.llm.client import LLMClient
from app.llm.routing import Deployment, ModelRouter, is_anthropic

HEADERS = {"anthropic-beta": "interleaved-thinking-2025-05-14", "anthropic-version": "2023-06-01"}


def test_headers_only_for_anthropic_deployments() -> None:
    client = LLMClient(ModelRouter())
    claude = Deployment("c", "anthropic/claude-sonnet-4-5", {"api_base": "http://x"})
    pinned = Deployment("p", "anthropic/claude", {"extra_headers": {"anthropic-beta": "ours"}})
    other = Deployment("o", "openai/gpt-4o-mini", {"api_base": "http://x"})
    provider = Deployment("v", "claude-x", {"custom_llm_provider": "anthropic"})
    assert is_anthropic(claude)
    assert is_anthropic(provider)
    assert not is_anthropic(other)
    assert client._call_kwargs(claude, {}, None, HEADERS)["extra_headers"] == HEADERS
    assert (
        client._call_kwargs(pinned, {}, None, HEADERS)["extra_headers"]["anthropic-beta"] == "ours"
    )
    assert "extra_headers" not in client._call_kwargs(other, {}, None, HEADERS)
    # A client cannot smuggle headers in the body.
    smuggled = client._call_kwargs(claude, {"extra_headers": {"x-evil": "1"}}, None, None)
    assert "extra_headers" not in smuggled
