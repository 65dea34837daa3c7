"""The real server with the openai SDK: memories injected, compaction over a long conversation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.memories.helpers import SUMMARY, upstream_chats, words
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(
        tmp_path_factory,
        fake_upstream_server,
        {
            "CONTEXTGATE_SUMMARIZER_MODEL": "fake-summarizer",
            "CONTEXTGATE_MEMORY_EXTRACTION_MODE": "off",
        },
        name="memory",
    )


def test_sdk_memory_injection_and_compaction(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    sdk = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    http = httpx.Client(base_url=server.url, timeout=30)
    try:
        memory = http.post(
            "/v1/memories",
            json={"user": "zoe", "content": "Zoe is allergic to peanuts", "importance": 9},
        ).json()
        stream = sdk.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "Any peanuts in satay?"}],
            user="zoe",
            stream=True,
        )
        chunks = list(stream)
        metadata: Any = chunks[-1].model_extra or {}
        injected = metadata["context_utilization"]["memories_injected"]
        assert [m["id"] for m in injected] == [memory["id"]]
        sent = upstream_chats(fake_upstream)[-1]["messages"]
        assert "- [note, importance 9, just now] Zoe is allergic to peanuts" in sent[-1]["content"]

        fake_upstream.script("fake-summarizer", [SUMMARY] * 20)
        conversation_id = None
        last: Any = None
        for i in range(12):
            extra: dict[str, Any] = {"context": {"max_input_tokens": 600}}
            if conversation_id:
                extra["conversation_id"] = conversation_id
            last = sdk.chat.completions.create(
                model="fake-model",
                messages=[{"role": "user", "content": f"turn {i} " + words(20, "w")}],
                extra_body=extra,
            )
            conversation_id = (last.model_extra or {})["conversation_id"]
        assert (last.model_extra or {})["context_utilization"]["breakdown"]["memory"] > 0
        sent = upstream_chats(fake_upstream)[-1]["messages"]
        assert sent[0]["content"].startswith("[MEMORY:EPISODIC]")
        detail = http.get(f"/v1/conversations/{conversation_id}").json()
        assert len(detail["messages"]) == 24
        assert detail["summaries"]
    finally:
        http.close()
