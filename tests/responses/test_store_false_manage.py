"""CONTEXTGATE_RESPONSES_STORE_FALSE=manage, the default: a client that always sends
``store: false`` and its whole input (as Codex does) still gets one stored, context-managed
conversation — but no response object to retrieve or continue."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "gpt-4o-mini"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    yield from module_server(tmp_path_factory, fake_upstream_server, name="resp-manage")


def test_store_false_is_managed_but_not_kept(server: ContextgateServer) -> None:
    sdk = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=30)
    first = sdk.responses.create(model=MODEL, input="plan the change", store=False)
    conversation_id = (first.model_extra or {})["conversation_id"]
    assert conversation_id
    # The whole input again, with the answer and a new message: the same conversation goes on.
    second = sdk.responses.create(
        model=MODEL,
        store=False,
        input=[
            {"role": "user", "content": "plan the change"},
            {"role": "assistant", "content": first.output_text},
            {"role": "user", "content": "now do it"},
        ],
    )
    assert (second.model_extra or {})["conversation_id"] == conversation_id
    notes = (second.model_extra or {})["context_utilization"]["notes"]
    assert any(
        "store=false: the conversation is stored and its context managed" in n for n in notes
    )
    stored = httpx.get(f"{server.base_url}/conversations/{conversation_id}").json()["messages"]
    assert [m["content"] for m in stored] == [
        "plan the change",
        "Echo: plan the change",
        "now do it",
        "Echo: now do it",
    ]
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve(second.id)
    sdk.close()
