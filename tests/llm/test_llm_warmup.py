"""litellm is imported at start exactly when some model name will be reached through it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.llm.client import LLMClient
from app.llm.routing import Deployment, ModelRouter

UPSTREAM = "http://127.0.0.1:9/v1"
VLLM = Deployment("local", "openai/llama", {"api_base": UPSTREAM, "api_key": "k"})
ANTHROPIC = Deployment("claude", "anthropic/claude-3-5-sonnet", {"api_key": "k"})
WITH_RPM = Deployment("limited", "openai/llama", {"api_base": UPSTREAM, "rpm": 10})


@pytest.mark.parametrize(
    ("deployments", "upstream", "direct", "needed"),
    [
        ([], UPSTREAM, True, False),  # one OpenAI-compatible upstream for every name
        ([VLLM], UPSTREAM, True, False),  # and a model_list of such servers
        ([VLLM, ANTHROPIC], UPSTREAM, True, True),  # a provider only litellm reaches
        ([WITH_RPM], UPSTREAM, True, True),  # a litellm parameter the direct path leaves
        ([VLLM], None, True, True),  # names outside model_list go to litellm as they are
        ([], UPSTREAM, False, True),  # CONTEXTGATE_UPSTREAM_TRANSPORT=litellm
    ],
)
def test_needs_litellm(
    deployments: list[Deployment], upstream: str | None, direct: bool, needed: bool
) -> None:
    client = LLMClient(ModelRouter(deployments, upstream_base_url=upstream), direct=direct)
    assert client.needs_litellm() is needed


_PROBE = """
import sys
import app
from app.llm.client import LLMClient
from app.llm.routing import ModelRouter
client = LLMClient(ModelRouter([], upstream_base_url="http://127.0.0.1:9/v1"))
client.warm_up(embeddings={embeddings})
print("litellm" in sys.modules)
"""


@pytest.mark.parametrize("embeddings", [False, True])
def test_litellm_is_imported_at_start_for_an_embedding_model(embeddings: bool) -> None:
    """In a fresh interpreter: another test of this session may have imported litellm."""
    probe = _PROBE.format(embeddings=embeddings)
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == str(embeddings)
