"""The two upstream transports (CONTEXTGATE_UPSTREAM_TRANSPORT) behave the same end to end.

Two real servers, one per transport, in front of the same fake upstream: each scenario runs on
both (the fake upstream reset before each, so its call ids match) and what the openai SDK sees,
what the upstream receives and what is stored must be equal. A subprocess checks that the
direct path never imports litellm (nor the openai SDK).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import WEATHER_TOOL, module_server
from tests.support.proxy import REPO, ContextgateServer

pytestmark = pytest.mark.e2e

MODEL = "gpt-4o-mini"
UPSTREAM_KEY = "sk-upstream-transports"
TRANSPORTS = ("auto", "litellm")
# What a stored message is compared on (ids and timestamps differ between two databases).
STORED_FIELDS = ("sequence_number", "role", "content", "tool_calls", "tool_call_id", "status")


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[dict[str, ContextgateServer]]:
    with ExitStack() as stack:
        started = {}
        for transport in TRANSPORTS:
            env = {
                "CONTEXTGATE_UPSTREAM_API_KEY": UPSTREAM_KEY,
                "CONTEXTGATE_UPSTREAM_TRANSPORT": transport,
            }
            server = contextmanager(module_server)(
                tmp_path_factory, fake_upstream_server, env, name=f"transport-{transport}"
            )
            started[transport] = stack.enter_context(server)
        yield started


Scenario = Callable[[openai.OpenAI, httpx.Client, FakeUpstream], dict[str, Any]]


def run_on_both(
    servers: dict[str, ContextgateServer], fake: FakeUpstream, scenario: Scenario
) -> dict[str, dict[str, Any]]:
    """The scenario's summary per transport; asserts which path each server took upstream."""
    results = {}
    for transport, server in servers.items():
        fake.reset()
        with (
            openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=30) as sdk,
            httpx.Client(base_url=server.url, timeout=30) as http,
        ):
            results[transport] = scenario(sdk, http, fake)
        calls = [r for r in fake.requests() if r["path"].endswith("/chat/completions")]
        assert calls
        for call in calls:
            assert call["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"
            # The openai SDK (litellm's path) announces itself; the direct path is plain httpx.
            assert ("x-stainless-lang" in call["headers"]) is (transport == "litellm")
        results[transport]["upstream_bodies"] = [without_nulls(call["body"]) for call in calls]
    return results


def without_nulls(body: dict[str, Any]) -> dict[str, Any]:
    """The body with messages' null fields dropped: litellm leaves out the `"content": null` of
    an assistant message with tool calls, which the direct path forwards as the client sent it."""
    messages = [{k: v for k, v in m.items() if v is not None} for m in body["messages"]]
    return {**body, "messages": messages}


def stored(http: httpx.Client, conversation_id: str) -> list[dict[str, Any]]:
    response = http.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    return [{key: m.get(key) for key in STORED_FIELDS} for m in response.json()["messages"]]


def conversation_of(result: Any) -> str:
    conversation_id = (result.model_extra or {})["conversation_id"]
    assert isinstance(conversation_id, str)
    assert conversation_id.startswith("conv_")
    return conversation_id


def counts(usage: Any) -> dict[str, int] | None:
    """The token counts (litellm adds a completion_tokens_details the upstream never sent)."""
    if usage is None:
        return None
    return {
        key: getattr(usage, key) for key in ("prompt_tokens", "completion_tokens", "total_tokens")
    }


def tool_delta(call: Any) -> dict[str, Any]:
    """A streamed tool-call delta; litellm repeats `type` on every piece, OpenAI only once."""
    data: dict[str, Any] = call.model_dump()
    if data["id"] is None:
        data.pop("type")
    return data


def summary(completion: Any) -> dict[str, Any]:
    choice = completion.choices[0]
    calls = choice.message.tool_calls or []
    return {
        "model": completion.model,
        "role": choice.message.role,
        "content": choice.message.content,
        "finish_reason": choice.finish_reason,
        "tool_calls": [c.model_dump() for c in calls],
        "usage": counts(completion.usage),
    }


def streamed(stream: Any) -> dict[str, Any]:
    chunks = list(stream)
    with_choices = [c for c in chunks if c.choices]
    deltas = [c.choices[0].delta for c in with_choices]
    calls = [tool_delta(call) for d in deltas for call in d.tool_calls or []]
    usage = [counts(c.usage) for c in chunks if not c.choices and c.usage is not None]
    return {
        "roles": [d.role for d in deltas if d.role],
        "content": [d.content for d in deltas if d.content],
        "tool_call_deltas": calls,
        "finish_reasons": [c.choices[0].finish_reason for c in with_choices],
        "usage": usage,
        "conversation_id": conversation_of(chunks[-1]),
    }


def assert_same(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    auto, via_litellm = results["auto"], results["litellm"]
    for key in auto:
        assert auto[key] == via_litellm[key], key
    assert auto.keys() == via_litellm.keys()
    return auto


# --- scenarios ----------------------------------------------------------------------------------


def test_non_streaming_and_continuation_are_the_same(
    servers: dict[str, ContextgateServer], fake_upstream: FakeUpstream
) -> None:
    def scenario(sdk: openai.OpenAI, http: httpx.Client, fake: FakeUpstream) -> dict[str, Any]:
        messages: list[Any] = [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello transports"},
        ]
        first = sdk.chat.completions.create(
            model=MODEL, messages=messages, temperature=0.3, seed=7, user="u-1"
        )
        conversation_id = conversation_of(first)
        second = sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "and again"}],
            extra_body={"conversation_id": conversation_id},
        )
        assert conversation_of(second) == conversation_id
        return {
            "first": summary(first),
            "second": summary(second),
            "stored": stored(http, conversation_id),
        }

    result = assert_same(run_on_both(servers, fake_upstream, scenario))
    first, second = result["first"], result["second"]
    assert (first["content"], first["finish_reason"]) == ("Echo: hello transports", "stop")
    assert (second["content"], second["finish_reason"]) == ("Echo: and again", "stop")
    assert first["model"] == MODEL
    assert first["usage"]["prompt_tokens"] > 0
    assert first["usage"]["completion_tokens"] > 0
    first_body, second_body = result["upstream_bodies"]
    assert (first_body["temperature"], first_body["seed"], first_body["user"]) == (0.3, 7, "u-1")
    assert "stream" not in first_body
    assert [m["content"] for m in second_body["messages"]] == [
        "be brief", "hello transports", "Echo: hello transports", "and again",
    ]  # fmt: skip
    assert [(m["role"], m["content"], m["status"]) for m in result["stored"]] == [
        ("system", "be brief", "complete"),
        ("user", "hello transports", "complete"),
        ("assistant", "Echo: hello transports", "complete"),
        ("user", "and again", "complete"),
        ("assistant", "Echo: and again", "complete"),
    ]


def test_streaming_and_continuation_are_the_same(
    servers: dict[str, ContextgateServer], fake_upstream: FakeUpstream
) -> None:
    def scenario(sdk: openai.OpenAI, http: httpx.Client, fake: FakeUpstream) -> dict[str, Any]:
        first = streamed(
            sdk.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "stream these five words please"}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        conversation_id = first.pop("conversation_id")
        second = streamed(
            sdk.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "more words"}],
                stream=True,
                extra_body={"conversation_id": conversation_id},
            )
        )
        assert second.pop("conversation_id") == conversation_id
        return {"first": first, "second": second, "stored": stored(http, conversation_id)}

    result = assert_same(run_on_both(servers, fake_upstream, scenario))
    first, second = result["first"], result["second"]
    assert first["roles"] == ["assistant"]
    assert len(first["content"]) >= 3
    assert "".join(first["content"]) == "Echo: stream these five words please"
    assert first["finish_reasons"][-1] == "stop"
    assert first["finish_reasons"].count("stop") == 1
    # Exactly one chunk carries usage (contextgate's last one), as OpenAI sends it.
    assert len(first["usage"]) == 1
    assert first["usage"][0]["completion_tokens"] > 0
    assert "".join(second["content"]) == "Echo: more words"
    assert second["usage"] == []  # not asked for
    for body in result["upstream_bodies"]:
        assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})
    assert [(m["role"], m["content"], m["status"]) for m in result["stored"]] == [
        ("user", "stream these five words please", "complete"),
        ("assistant", "Echo: stream these five words please", "complete"),
        ("user", "more words", "complete"),
        ("assistant", "Echo: more words", "complete"),
    ]


def test_tool_call_round_trip_is_the_same(
    servers: dict[str, ContextgateServer], fake_upstream: FakeUpstream
) -> None:
    def scenario(sdk: openai.OpenAI, http: httpx.Client, fake: FakeUpstream) -> dict[str, Any]:
        messages: list[Any] = [
            {"role": "user", "content": 'Weather? CALL_TOOL:get_weather:{"city": "Paris"}'}
        ]
        first = sdk.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
        conversation_id = conversation_of(first)
        call = (first.choices[0].message.tool_calls or [])[0]
        messages += [
            first.choices[0].message.model_dump(),
            {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"},
        ]
        second = sdk.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
        assert conversation_of(second) == conversation_id
        streamed_call = streamed(
            sdk.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Oslo"}'}],
                tools=[WEATHER_TOOL],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        streamed_call.pop("conversation_id")
        return {
            "first": summary(first),
            "second": summary(second),
            "streamed": streamed_call,
            "stored": stored(http, conversation_id),
        }

    result = assert_same(run_on_both(servers, fake_upstream, scenario))
    first = result["first"]
    assert first["finish_reason"] == "tool_calls"
    (call,) = first["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert result["second"]["content"] == "Tool results: 18C and sunny"
    assert result["upstream_bodies"][0]["tools"] == [WEATHER_TOOL]
    assert [m["role"] for m in result["upstream_bodies"][1]["messages"]] == [
        "user", "assistant", "tool",
    ]  # fmt: skip
    deltas = result["streamed"]["tool_call_deltas"]
    assert len(deltas) >= 2
    assert deltas[0]["function"]["name"] == "get_weather"
    assert deltas[0]["id"]
    arguments = "".join(d["function"]["arguments"] or "" for d in deltas)
    assert json.loads(arguments) == {"city": "Oslo"}
    assert result["streamed"]["finish_reasons"][-1] == "tool_calls"
    assert result["streamed"]["usage"][0]["prompt_tokens"] > 0
    history = result["stored"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[1]["tool_calls"][0]["id"] == call["id"]
    assert history[2]["tool_call_id"] == call["id"]
    assert history[3]["content"] == "Tool results: 18C and sunny"


# --- the direct path does not load litellm ------------------------------------------------------

PROBE = textwrap.dedent(
    """
    import asyncio, json, sys

    import httpx

    from app.core.settings import Settings
    from app.main import create_app

    async def main(database_url, upstream_url, transport):
        settings = Settings(database_url=database_url, upstream_base_url=upstream_url,
                            upstream_transport=transport, max_retries=0, _env_file=None)
        application = create_app(settings)
        loaded_at_start = "litellm" in sys.modules
        async with application.router.lifespan_context(application):
            client = httpx.AsyncClient(transport=httpx.ASGITransport(app=application),
                                       base_url="http://contextgate", timeout=30)
            async with client:
                plain = await client.post("/v1/chat/completions", json={
                    "model": "gpt-4o-mini",
                    "messages": [{"role": "user", "content": "no litellm here"}]})
                streamed = await client.post("/v1/chat/completions", json={
                    "model": "gpt-4o-mini", "stream": True,
                    "messages": [{"role": "user", "content": "nor here"}]})
        text = ""
        for line in streamed.text.splitlines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:]).get("choices") or []:
                    text += choice["delta"].get("content") or ""
        print(json.dumps({
            "plain": [plain.status_code, plain.json()["choices"][0]["message"]["content"]],
            "stream": [streamed.status_code, text, streamed.text.rstrip().endswith("[DONE]")],
            "litellm_at_start": loaded_at_start,
            "litellm": "litellm" in sys.modules,
            "openai": "openai" in sys.modules,
        }))

    asyncio.run(main(*sys.argv[1:4]))
    """
)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_direct_transport_never_imports_litellm(
    transport: str, fake_upstream: FakeUpstream, sqlite_url: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTGATE_")}
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, sqlite_url, fake_upstream.base_url, transport],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["plain"] == [200, "Echo: no litellm here"]
    assert report["stream"] == [200, "Echo: nor here", True]
    assert report["litellm_at_start"] is False
    assert len([r for r in fake_upstream.requests() if r["body"].get("stream")]) == 1
    if transport == "auto":
        assert (report["litellm"], report["openai"]) == (False, False)
    else:
        assert report["litellm"] is True
