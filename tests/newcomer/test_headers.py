"""Issue 17 point 7: the conversation id and a context summary as response headers, read the
way the README shows from clients that drop unknown body fields (litellm as a client)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import litellm
import pytest

from tests.support.proxy import ContextgateServer


async def test_headers_summarize_the_context_utilization(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "Hello"}],
            "attachments": [{"content": "A short memo.", "title": "memo"}],
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    utilization = body["context_utilization"]
    headers = response.headers
    assert headers["x-contextgate-conversation-id"] == body["conversation_id"]
    assert headers["x-conversation-id"] == body["conversation_id"]
    assert headers["x-contextgate-strategy"] == utilization["strategy"]
    assert int(headers["x-contextgate-tokens-used"]) == utilization["tokens_used"]
    assert int(headers["x-contextgate-max-input-tokens"]) == utilization["max_input_tokens"]
    assert int(headers["x-contextgate-messages-included"]) == utilization["messages_included"]
    assert int(headers["x-contextgate-artifacts"]) == 1
    assert headers["x-contextgate-llm-planning-used"] == "false"
    assert float(headers["x-contextgate-cost-usd"]) == pytest.approx(body["cost"]["total_cost"])

    stream = await client.post(
        "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "conversation_id": body["conversation_id"],
            "messages": [{"role": "user", "content": "Again"}],
            "stream": True,
        },
    )
    assert stream.headers["x-contextgate-conversation-id"] == body["conversation_id"]
    assert int(stream.headers["x-contextgate-tokens-used"]) > 0


def test_litellm_as_a_client_reads_them(start_proxy: Callable[..., ContextgateServer]) -> None:
    server = start_proxy()
    answer: Any = litellm.completion(
        model="openai/gpt-4o-mini",
        api_base=server.base_url,
        api_key="sk-anything",
        messages=[{"role": "user", "content": "Hello"}],
        max_retries=0,
    )
    headers = answer._hidden_params["additional_headers"]
    conversation_id = headers["llm_provider-x-contextgate-conversation-id"]
    assert conversation_id.startswith("conv_")
    assert int(headers["llm_provider-x-contextgate-tokens-used"]) > 0
