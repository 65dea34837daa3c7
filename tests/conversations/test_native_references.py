"""item_reference and ``conversation`` on the native path (an OpenAI reasoning model on its
own Responses API, the fake upstream verifying every encrypted reasoning item it gets back):
a reference to a reasoning item the client saw without ``encrypted_content`` sends the stored
item, encrypted reasoning included, so the provider accepts the continuation."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.responses.test_native_responses import (
    ASK,
    REASONER,
    WEATHER,
    _models,
    dumped,
    reasoning_of,
    upstream,
)
from tests.support.e2e import module_server
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    config = _models(tmp_path_factory.mktemp("models"), fake_upstream_server)
    yield from module_server(
        tmp_path_factory, fake_upstream_server, {"CONTEXTGATE_CONFIG": str(config)}, name="nref"
    )


@pytest.fixture
def sdk(server: ContextgateServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client:
        yield client


def test_references_carry_the_stored_encrypted_reasoning(
    sdk: openai.OpenAI, fake_upstream: FakeUpstream
) -> None:
    first = sdk.responses.create(model=REASONER, input=ASK, tools=[WEATHER])
    reasoning, call = dumped(first)
    assert reasoning["type"] == "reasoning"
    assert "encrypted_content" not in reasoning  # not asked for: not shown
    second = sdk.responses.create(
        model=REASONER,
        tools=[WEATHER],
        input=[
            # Not the stored opening: no stored conversation continues, the items are new.
            {"role": "user", "content": f"Once more. {ASK}"},
            {"type": "item_reference", "id": reasoning["id"]},
            {"type": "item_reference", "id": call["id"]},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"},
        ],
    )
    assert second.output_text == "Tool results: sunny (reasoning items carried: 1)"
    carried = reasoning_of(upstream(fake_upstream)[-1]["input"])
    assert carried[0]["encrypted_content"].startswith("gAAAAB")
    assert (second.model_extra or {})["conversation_id"] != (first.model_extra or {})[
        "conversation_id"
    ]


def test_conversation_on_the_native_path(sdk: openai.OpenAI, fake_upstream: FakeUpstream) -> None:
    conversation = sdk.conversations.create(
        items=[{"type": "message", "role": "user", "content": "My name is Ada."}]
    )
    answer = sdk.responses.create(model=REASONER, input="Who am I?", conversation=conversation.id)
    assert answer.conversation is not None
    assert answer.conversation.id == conversation.id
    sent = [item.get("content") for item in upstream(fake_upstream)[-1]["input"]]
    assert sent[:1] == ["My name is Ada."]
    assert sent[-1] == "Who am I?"
