"""The direct Anthropic path sends what litellm sends and gives what litellm gives.

Each realistic prompt runs twice against the fake Anthropic Messages API (reset in between, so
its ids and prompt cache start the same): once through litellm (``direct=False``), once through
app/llm/anthropic_direct.py. The request bodies the fake recorded, the headers Anthropic reads,
the normalized completions and the streamed chunks contextgate reads must be equal; only the
ids and timestamps litellm makes up per call are left out. An end-to-end check runs the
anthropic SDK against a contextgate server with an Anthropic deployment.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any

import anthropic
import pytest

from app.core.errors import ContextGateError
from app.llm.anthropic_direct import is_direct_anthropic
from app.llm.anthropic_direct_request import Unsupported, anthropic_body, model_supported
from app.llm.client import LLMClient, RetryPolicy
from app.llm.errors import map_upstream_error
from app.llm.routing import Deployment, ModelRouter
from tests.fake_upstream import FakeUpstream
from tests.fake_upstream.anthropic import sign
from tests.support.e2e import module_server
from tests.support.models import ANTHROPIC_LITELLM_MODEL, fake_model_list
from tests.support.proxy import ContextgateServer

NAME = "claude"
KEY = "sk-ant-api03-" + "k7Q2" * 12
READ_HEADERS = ("anthropic-version", "anthropic-beta", "x-api-key", "content-type")
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
READ = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    "cache_control": {"type": "ephemeral"},
}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()


def deployment(fake: FakeUpstream) -> Deployment:
    params = {"api_base": fake.url, "api_key": KEY}
    return Deployment(NAME, ANTHROPIC_LITELLM_MODEL, params)


def client(fake: FakeUpstream, *, direct: bool) -> LLMClient:
    router = ModelRouter([deployment(fake)])
    return LLMClient(router, retry=RetryPolicy(max_retries=0), direct=direct)


def without_ids(value: Any) -> Any:
    """The completion or chunk without what litellm makes up per call (id, created)."""
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in ("id", "created")}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


def call_ids_kept(result: dict[str, Any]) -> list[str]:
    choices = result.get("choices") or [{}]
    calls = (choices[0].get("message") or {}).get("tool_calls") or []
    return [call["id"] for call in calls]


def recorded(fake: FakeUpstream, path_taken: str) -> list[dict[str, Any]]:
    calls = [r for r in fake.requests() if r["path"] == "/v1/messages"]
    assert calls
    for call in calls:
        agent = call["headers"].get("user-agent", "")
        assert agent.startswith(path_taken), (agent, path_taken)
    return [
        {
            "body": call["body"],
            "headers": {h: call["headers"].get(h) for h in READ_HEADERS},
        }
        for call in calls
    ]


async def run(
    fake: FakeUpstream,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    *,
    direct: bool,
    stream: bool = False,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    await fake.areset()
    llm = client(fake, direct=direct)
    sent = copy.deepcopy(messages)
    try:
        if stream:
            handle = await llm.stream(NAME, messages, params, headers=headers)
            chunks = [chunk async for chunk in handle.chunks()]
            result: dict[str, Any] = {"chunks": without_ids(chunks)}
            assert len({chunk["id"] for chunk in chunks}) == 1
        else:
            completion = await llm.complete(NAME, messages, params, headers=headers)
            result = {
                "completion": without_ids(completion.response),
                "call_ids": call_ids_kept(dict(completion.response)),
                "usage": completion.usage.raw if completion.usage else None,
                "cost": (completion.prompt_cost, completion.completion_cost),
                "cache_cost": (completion.cache_read_cost, completion.cache_write_cost),
            }
    finally:
        await llm.aclose()
    assert messages == sent  # neither path changes the caller's messages
    result["upstream"] = recorded(fake, "contextgate" if direct else "litellm")
    return result


async def same(
    fake: FakeUpstream,
    messages: list[dict[str, Any]],
    params: dict[str, Any] | None = None,
    *,
    stream: bool = False,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    params = params or {}
    via_litellm = await run(fake, messages, params, direct=False, stream=stream, headers=headers)
    direct = await run(fake, messages, params, direct=True, stream=stream, headers=headers)
    assert direct["upstream"] == via_litellm["upstream"]
    for key in via_litellm:
        assert direct[key] == via_litellm[key], key
    return direct


# ---- prompts --------------------------------------------------------------------------------


def assistant_with_thinking(text: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    thought = f"Thinking about: {text[:50]}"
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": calls,
        "reasoning_content": thought,
        "thinking_blocks": [{"type": "thinking", "thinking": thought, "signature": sign(thought)}],
    }


def call(call_id: str, name: str, arguments: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
        **extra,
    }


def tool_loop(thinking: bool) -> list[dict[str, Any]]:
    """Claude Code's shape: a cached system prompt, a task, tool calls and their results."""
    task = 'Fix the bug. CALL_TOOL:read_file:{"path": "a.py"}'
    calls_1 = [
        call("toolu_a1", "read_file", '{"path": "a.py"}'),
        call("toolu_a2", "read_file", '{"path": "b.py"}'),
    ]
    calls_2 = [call("toolu_b1", "get_weather", '{"city": "Paris", "units": [1, 2.5, null]}')]
    first = {"role": "assistant", "content": "Reading both.", "tool_calls": calls_1}
    second = {"role": "assistant", "content": None, "tool_calls": calls_2}
    if thinking:
        first = {**assistant_with_thinking(task, calls_1), "content": "Reading both."}
        second = assistant_with_thinking(task, calls_2)
    return [
        {
            "role": "system",
            "content": [
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2"},
                {
                    "type": "text",
                    "text": "You are Claude Code.",
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": task}]},
        first,
        {"role": "tool", "tool_call_id": "toolu_a1", "content": "print('a')"},
        {
            "role": "tool",
            "tool_call_id": "toolu_a2",
            "content": [
                {"type": "text", "text": "print('b')"},
                {"type": "text", "text": "# end", "cache_control": {"type": "ephemeral"}},
            ],
        },
        second,
        {"role": "tool", "tool_call_id": "toolu_b1", "content": "18C", "is_error": True},
        {"role": "user", "content": "and now?  "},
    ]


PROMPTS: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "plain": ([{"role": "user", "content": "hello there"}], {}),
    "system_cached": (
        [
            {"role": "system", "content": "Be brief."},
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "Long rules.", "cache_control": {"type": "ephemeral"}}
                ],
            },
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello! "},
            {"role": "user", "content": [{"type": "text", "text": "again"}]},
        ],
        {"max_tokens": 300, "temperature": 0.2, "user": "user-7"},
    ),
    "tool_loop": (tool_loop(thinking=False), {"tools": [READ, WEATHER], "max_tokens": 4096}),
    "tool_loop_thinking": (
        tool_loop(thinking=True),
        {
            "tools": [READ, WEATHER],
            "max_tokens": 8000,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
        },
    ),
    "thinking_default_max_tokens": (
        [{"role": "user", "content": "REDACTED_THINKING think hard"}],
        {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    ),
    "new_tool_call_with_thinking": (
        [{"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Oslo"}'}],
        {"tools": [WEATHER], "thinking": {"type": "enabled", "budget_tokens": 1024}},
    ),
    "image": (
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/cat.jpg"},
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            }
        ],
        {},
    ),
    "stop_sequences": (
        [{"role": "user", "content": "count to ten"}],
        {"stop": ["seven", "\n\nHuman:"], "top_p": 0.9, "top_k": 20},
    ),
    "stop_string": ([{"role": "user", "content": "count"}], {"stop": "three"}),
    "none_values": (
        [{"role": "user", "content": "count"}],
        {"stop": None, "max_tokens": None, "temperature": None, "user": None},
    ),
    "tool_choice": (
        [{"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Rome"}'}],
        {
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        },
    ),
    "tool_choice_required_serial": (
        [{"role": "user", "content": "weather?"}],
        {"tools": [WEATHER], "tool_choice": "required", "parallel_tool_calls": False},
    ),
    "empty_texts": (
        [
            {"role": "user", "content": "   "},
            {"role": "assistant", "content": "", "tool_calls": [call("t 1", "get_weather", "")]},
            {"role": "tool", "tool_call_id": "t 1", "content": ""},
        ],
        {"tools": [WEATHER], "user": "someone@example.com"},
    ),
}


@pytest.mark.parametrize("name", sorted(PROMPTS))
async def test_non_streaming_is_the_same(name: str, fake_upstream: FakeUpstream) -> None:
    messages, params = PROMPTS[name]
    result = await same(fake_upstream, messages, params)
    assert result["completion"]["choices"][0]["message"]["role"] == "assistant"


@pytest.mark.parametrize("name", sorted(PROMPTS))
async def test_streaming_is_the_same(name: str, fake_upstream: FakeUpstream) -> None:
    messages, params = PROMPTS[name]
    result = await same(fake_upstream, messages, params, stream=True)
    assert result["chunks"][-1]["usage"]["completion_tokens"] > 0


async def test_a_second_call_reads_the_prompt_cache_the_same(fake_upstream: FakeUpstream) -> None:
    messages, params = PROMPTS["tool_loop_thinking"]
    for stream in (False, True):
        results = []
        for direct in (False, True):
            await fake_upstream.areset()
            llm = client(fake_upstream, direct=direct)
            try:
                await llm.complete(NAME, messages, params)
                if stream:
                    handle = await llm.stream(NAME, messages, params)
                    results.append(without_ids([c async for c in handle.chunks()]))
                else:
                    second = await llm.complete(NAME, messages, params)
                    results.append(
                        [without_ids(second.response), second.cache_read_cost, second.prompt_cost]
                    )
            finally:
                await llm.aclose()
        assert results[0] == results[1]


async def test_anthropic_headers_are_the_same(fake_upstream: FakeUpstream) -> None:
    headers = {
        "anthropic-version": "2024-01-01",
        "anthropic-beta": ",".join(
            [
                "interleaved-thinking-2025-05-14",
                "unknown-beta",
                "fine-grained-tool-streaming-2025-05-14",
                "interleaved-thinking-2025-05-14",
            ]
        ),
    }
    messages, params = PROMPTS["tool_loop_thinking"]
    result = await same(fake_upstream, messages, params, headers=headers)
    sent = result["upstream"][0]["headers"]
    assert sent["x-api-key"] == KEY
    assert set(sent["anthropic-beta"].split(",")) == {
        "interleaved-thinking-2025-05-14",
        "fine-grained-tool-streaming-2025-05-14",
    }
    await same(fake_upstream, messages, params, headers=headers, stream=True)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422, 429, 500, 503, 529])
async def test_errors_map_the_same(status: int, stream: bool, fake_upstream: FakeUpstream) -> None:
    """What the client sees of an Anthropic error is litellm's mapping: the class, status,
    code, type and headers (Retry-After) always; the message too for a client error (litellm
    passes a server error's JSON body on as its text, the direct path its message)."""
    mapped = []
    for direct in (False, True):
        await fake_upstream.areset()
        await fake_upstream.afaults(
            ANTHROPIC_LITELLM_MODEL.removeprefix("anthropic/"),
            [
                {
                    "status": status,
                    "message": f"failure {status}",
                    "headers": {"retry-after": "3", "request-id": "req_1"},
                }
            ],
        )
        llm = client(fake_upstream, direct=direct)
        send = llm.stream if stream else llm.complete
        try:
            with pytest.raises(ContextGateError) as raised:
                await send(NAME, [{"role": "user", "content": "hi"}], {})
        finally:
            await llm.aclose()
        error = raised.value
        message = error.message if error.status_code < 500 and not stream else None
        mapped.append(
            (
                type(error),
                error.status_code,
                error.code,
                error.error_type,
                message,
                error.param,
                error.headers,
            )
        )
        assert KEY not in error.message
    assert mapped[0] == mapped[1]


# ---- what the direct path leaves to litellm ---------------------------------------------------


def test_only_plain_anthropic_deployments_are_direct(fake_upstream: FakeUpstream) -> None:
    assert is_direct_anthropic(deployment(fake_upstream))
    base = {"api_base": fake_upstream.url, "api_key": KEY}
    for model, params in (
        ("anthropic/claude-sonnet-4-5-20250929", {"api_base": fake_upstream.url}),
        ("anthropic/claude-sonnet-4-5-20250929", {"api_key": KEY}),
        ("anthropic/claude-sonnet-4-5-20250929", {**base, "drop_params": True}),
        ("anthropic/claude-sonnet-4-5-20250929", {**base, "extra_headers": {"a": "b"}}),
        ("anthropic/not-a-known-model", base),
        ("openai/claude-sonnet-4-5-20250929", base),
    ):
        assert not is_direct_anthropic(Deployment(NAME, model, params)), (model, params)


def test_models_the_direct_path_takes_are_plain_for_litellm() -> None:
    """For every Claude model of litellm's map the direct path would take, litellm's own
    capability checks agree that its translation is the plain one reproduced here."""
    import litellm
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig
    from litellm.llms.anthropic.common_utils import AnthropicModelInfo

    taken = 0
    for model, entry in litellm.model_cost.items():
        if entry.get("litellm_provider") != "anthropic" or "/" in model:
            continue
        if not model_supported(model):
            continue
        taken += 1
        assert not AnthropicModelInfo._is_adaptive_thinking_model(model, "anthropic"), model
        assert not AnthropicModelInfo._is_always_on_thinking_model(model, "anthropic"), model
        assert AnthropicModelInfo._supports_sampling_params(model), model
        assert not AnthropicModelInfo.forced_tool_use_unsupported(model), model
        assert (
            AnthropicConfig.get_config(model=model)["max_tokens"]
            == anthropic_body(model, [{"role": "user", "content": "x"}], {})["max_tokens"]
        )
    assert taken >= 5


@pytest.mark.parametrize(
    ("messages", "params"),
    [
        ([{"role": "user", "content": "x"}], {"n": 2}),
        ([{"role": "user", "content": "x"}], {"response_format": {"type": "json_object"}}),
        ([{"role": "user", "content": "x"}], {"reasoning_effort": "low"}),
        ([{"role": "user", "content": "x"}], {"thinking": {"type": "adaptive"}}),
        ([{"role": "user", "content": "x"}, {"role": "system", "content": "late"}], {}),
        ([{"role": "developer", "content": "d"}, {"role": "user", "content": "x"}], {}),
        ([{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}], {}),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": "http://x/a.png"}]}],
            {},
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [call("a", "f", "{}")]},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ],
            {},
        ),
        (
            [{"role": "user", "content": "x"}],
            {"tools": [{"type": "function", "function": {"name": "a.b", "parameters": {}}}]},
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [call("a", "f", "{bad")]},
                {"role": "tool", "tool_call_id": "a", "content": "r"},
            ],
            {"tools": [WEATHER]},
        ),
    ],
)
def test_what_litellm_translates_otherwise_is_left_to_it(
    messages: list[dict[str, Any]], params: Mapping[str, Any]
) -> None:
    with pytest.raises(Unsupported):
        anthropic_body("claude-sonnet-4-5-20250929", messages, params)


async def test_an_unsupported_request_still_goes_through_litellm(
    fake_upstream: FakeUpstream,
) -> None:
    llm = client(fake_upstream, direct=True)
    try:
        completion = await llm.complete(
            NAME, [{"role": "user", "content": "hi"}], {"reasoning_effort": "low"}
        )
    finally:
        await llm.aclose()
    assert completion.content.startswith("Echo: hi")
    (request,) = [r for r in fake_upstream.requests() if r["path"] == "/v1/messages"]
    assert request["headers"]["user-agent"].startswith("litellm")


def test_a_mapped_error_never_shows_the_key() -> None:
    from app.llm.sse_stream import UpstreamHTTPError

    error = UpstreamHTTPError(
        401,
        {"type": "error", "error": {"type": "authentication_error", "message": f"bad {KEY}"}},
    )
    mapped = map_upstream_error(error, NAME)
    assert KEY not in mapped.message


# ---- more shapes: what the Messages door makes of Claude Code's requests ----------------------

SCRIPTED_ANSWER = {
    "content": "Let me look at both.",
    "tool_calls": [
        {"name": "read_file", "arguments": '{"path": "a.py"}'},
        {"name": "get_weather", "arguments": "{}"},
    ],
}
MORE: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "assistant_parts_and_marked_call": (
        [
            {"role": "user", "content": "start"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "One."},
                    {"type": "text", "text": "Two.", "cache_control": {"type": "ephemeral"}},
                ],
                "tool_calls": [
                    call(
                        "toolu_x",
                        "read_file",
                        '{"path": "c.py"}',
                        cache_control={"type": "ephemeral"},
                    )
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_x", "content": "print('c')"},
        ],
        {"tools": [WEATHER, READ]},
    ),
    "unsigned_and_redacted_history": (
        [
            {"role": "user", "content": "first"},
            {
                "role": "assistant",
                "content": "Answer.",
                "thinking_blocks": [
                    {"type": "thinking", "thinking": "from another model", "signature": ""},
                    {"type": "redacted_thinking", "data": "redacted:abc"},
                ],
            },
            {"role": "user", "content": "second"},
        ],
        {},
    ),
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name", sorted(MORE))
async def test_more_shapes_are_the_same(
    name: str, stream: bool, fake_upstream: FakeUpstream
) -> None:
    messages, params = MORE[name]
    await same(fake_upstream, messages, params, stream=stream)


@pytest.mark.parametrize("stream", [False, True])
async def test_text_and_several_calls_in_one_answer_are_the_same(
    stream: bool, fake_upstream: FakeUpstream
) -> None:
    results = []
    for direct in (False, True):
        await fake_upstream.areset()
        await fake_upstream.ascript(
            ANTHROPIC_LITELLM_MODEL.removeprefix("anthropic/"), [SCRIPTED_ANSWER]
        )
        llm = client(fake_upstream, direct=direct)
        params = {"tools": [WEATHER, READ]}
        try:
            if stream:
                handle = await llm.stream(NAME, [{"role": "user", "content": "go"}], params)
                results.append(without_ids([chunk async for chunk in handle.chunks()]))
            else:
                completion = await llm.complete(NAME, [{"role": "user", "content": "go"}], params)
                results.append(
                    [without_ids(completion.response), call_ids_kept(dict(completion.response))]
                )
        finally:
            await llm.aclose()
        recorded(fake_upstream, "contextgate" if direct else "litellm")
    assert results[0] == results[1]
    if not stream:
        message = results[1][0]["choices"][0]["message"]
        assert message["content"] == "Let me look at both."
        names = [c["function"]["name"] for c in message["tool_calls"]]
        assert names == ["read_file", "get_weather"]


# ---- end to end: the anthropic SDK against contextgate, on both transports ------------------

CLAUDE = "claude-fake"
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}
SDK_TOOL: Any = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    "cache_control": {"type": "ephemeral"},
}


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[dict[str, ContextgateServer]]:
    config = fake_model_list(
        tmp_path_factory.mktemp("models"), fake_upstream_server, names=(), anthropic=(CLAUDE,)
    )
    with ExitStack() as stack:
        started = {}
        for transport in ("auto", "litellm"):
            env = {"CONTEXTGATE_CONFIG": str(config), "CONTEXTGATE_UPSTREAM_TRANSPORT": transport}
            server = contextmanager(module_server)(
                tmp_path_factory, fake_upstream_server, env, name=f"anthropic-{transport}"
            )
            started[transport] = stack.enter_context(server)
        yield started


def sdk_scenario(sdk: anthropic.Anthropic) -> dict[str, Any]:
    """Claude Code's loop: system prompt and tools cached, thinking signed, full history."""
    system: Any = [
        {"type": "text", "text": "You are a coder.", "cache_control": {"type": "ephemeral"}}
    ]
    ask: Any = {"role": "user", "content": 'CALL_TOOL:get_weather:{"city": "Paris"}'}
    common: Any = {"model": CLAUDE, "max_tokens": 4096, "thinking": THINKING, "tools": [SDK_TOOL]}
    first = sdk.messages.create(system=system, messages=[ask], **common)
    call = first.content[-1]
    assert call.type == "tool_use"
    result: Any = {"type": "tool_result", "tool_use_id": call.id, "content": "sunny, 21 C"}
    history = [
        ask,
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [result]},
    ]
    with sdk.messages.stream(system=system, messages=history, **common) as stream:
        events = [event.model_dump() for event in stream]
        second = stream.get_final_message()
    history += [
        {"role": "assistant", "content": [b.model_dump() for b in second.content]},
        {"role": "user", "content": "REDACTED_THINKING thanks"},
    ]
    third = sdk.messages.create(system=system, messages=history, **common)
    with sdk.messages.stream(system=system, messages=history, **common) as stream:
        fourth = stream.get_final_message()

    def answer(message: Any) -> dict[str, Any]:
        data = message.model_dump()
        extra = message.model_extra or {}
        return {
            "content": data["content"],
            "stop_reason": data["stop_reason"],
            "usage": data["usage"],
            "cache_stats": (extra.get("context_utilization") or {}).get("cache_stats"),
        }

    for event in events:  # the message's id and the conversation's differ per server
        (event.get("message") or {}).pop("id", None)
        event.pop("conversation_id", None)
    return {
        "answers": [answer(m) for m in (first, second, third, fourth)],
        "events": events,
    }


def test_the_anthropic_sdk_sees_the_same_on_both_transports(
    servers: dict[str, ContextgateServer], fake_upstream: FakeUpstream
) -> None:
    results = {}
    for transport, server in servers.items():
        fake_upstream.reset()
        with anthropic.Anthropic(
            base_url=server.url, api_key="sk-any", max_retries=0, timeout=60
        ) as sdk:
            results[transport] = sdk_scenario(sdk)
        calls = [r for r in fake_upstream.requests() if r["path"] == "/v1/messages"]
        assert len(calls) == 4
        agents = {call["headers"]["user-agent"].split("/")[0] for call in calls}
        assert agents == {"contextgate" if transport == "auto" else "litellm"}
        results[transport]["upstream"] = [call["body"] for call in calls]
    direct, via_litellm = results["auto"], results["litellm"]
    assert direct["upstream"] == via_litellm["upstream"]
    assert direct["answers"] == via_litellm["answers"]
    assert direct["events"] == via_litellm["events"]
    assert [a["stop_reason"] for a in direct["answers"]] == ["tool_use"] + ["end_turn"] * 3
    assert direct["answers"][2]["usage"]["cache_read_input_tokens"] > 0


# ---- usage: litellm's own calculate_usage as the reference ---------------------------------

USAGES: list[tuple[dict[str, Any], str | None, bool]] = [
    ({"input_tokens": 10, "output_tokens": 5}, None, False),
    ({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": None}, None, False),
    (
        {
            "input_tokens": 7,
            "output_tokens": 40,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 2000,
            "cache_creation": {"ephemeral_5m_input_tokens": 60, "ephemeral_1h_input_tokens": 40},
        },
        "Let me think about the files and what to read next.",
        True,
    ),
    ({"input_tokens": 3, "output_tokens": 9}, "", True),
    (
        {"input_tokens": 3, "output_tokens": 30, "output_tokens_details": {"thinking_tokens": 12}},
        "ignored when reported",
        True,
    ),
    (
        {
            "input_tokens": 5,
            "output_tokens": 50,
            "iterations": [
                {
                    "input_tokens": 2,
                    "output_tokens": 20,
                    "cache_read_input_tokens": 10,
                    "cache_creation_input_tokens": 4,
                    "cache_creation": {"ephemeral_5m_input_tokens": 1},
                    "output_tokens_details": {"thinking_tokens": 5},
                },
                {"input_tokens": 3, "output_tokens": 30, "cache_creation_input_tokens": 6},
            ],
            "server_tool_use": {"web_search_requests": 1},
        },
        "x",
        False,
    ),
]


@pytest.mark.parametrize(("raw", "reasoning", "thinking_block"), USAGES)
def test_usage_is_litellms(
    raw: dict[str, Any], reasoning: str | None, thinking_block: bool
) -> None:
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    from app.llm.anthropic_direct_response import usage
    from app.llm.responses import normalize_completion

    content = [{"type": "thinking", "thinking": "", "signature": "s"}] if thinking_block else []
    expected = AnthropicConfig().calculate_usage(
        usage_object=copy.deepcopy(raw),
        reasoning_content=reasoning,
        completion_response={"content": content},
    )
    mine = usage(raw, reasoning, thinking_block)
    assert (
        normalize_completion({"usage": mine}, NAME)["usage"]
        == normalize_completion({"usage": expected}, NAME)["usage"]
    )


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("after", [0, 4, 7, 8, 9, 12])
async def test_a_connection_dropped_midway_is_reported_the_same(
    after: int, stream: bool, fake_upstream: FakeUpstream
) -> None:
    """The upstream closes the socket: before the answer (JSON: half the body), or after some
    events of a stream (then the chunks read so far arrive, and the error after them; after
    the stop reason, the stream ends normally, as litellm ends it)."""
    outcomes = []
    for direct in (False, True):
        await fake_upstream.areset()
        await fake_upstream.afaults(
            ANTHROPIC_LITELLM_MODEL.removeprefix("anthropic/"), [{"drop_after_chunks": after}]
        )
        llm = client(fake_upstream, direct=direct)
        chunks: list[Any] = []
        error: ContextGateError | None = None
        try:
            if stream:
                handle = await llm.stream(NAME, [{"role": "user", "content": "one two three"}], {})
                async for chunk in handle.chunks():
                    chunks.append(without_ids(chunk))
            else:
                await llm.complete(NAME, [{"role": "user", "content": "one two three"}], {})
        except Exception as exc:  # mid-stream: the upstream's own error, mapped by the caller
            error = map_upstream_error(exc, NAME)
        finally:
            await llm.aclose()
        failure = None if error is None else (type(error), error.status_code, error.code)
        assert failure is not None or (stream and after >= 9)
        outcomes.append((chunks, failure))
    assert outcomes[0] == outcomes[1]
