"""Anthropic's context editing against the real server, driven by the anthropic SDK's beta client.

A coding agent's loop (every call resends the whole history; each tool result comes back with a
line of text, as Claude Code's reminders do) on an Anthropic model (litellm's anthropic provider
to the fake upstream's /v1/messages, thinking on) and on an OpenAI-shaped one, long enough for
``clear_tool_uses_20250919`` to trigger. The fake upstreams refuse ``context_management`` (the
chat API does not know it; the Anthropic one without its beta), and the test reads what they got.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.e2e import module_server
from tests.support.models import ANTHROPIC_LITELLM_MODEL, fake_model_list
from tests.support.proxy import ContextgateServer

pytestmark = pytest.mark.e2e

CLAUDE = "claude-fake"
CHAT_MODEL = "gpt-4o-mini"
BETA = "context-management-2025-06-27"
PLACEHOLDER = "[contextgate: the result of tool "
TRIGGER = 4_000
STEPS = 9
# Step -> tool: the client protects "notes", the operator "operator_tool".
TOOLS_BY_STEP = ["read_file", "notes", "operator_tool"] + ["read_file"] * (STEPS - 3)
RAW_TOOLS = {"notes", "operator_tool"}


def _tool(name: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return {"name": name, "description": f"The {name} tool", "input_schema": schema}


TOOLS: Any = [_tool(name) for name in ("read_file", "notes", "operator_tool")]
EDITS: Any = {
    "edits": [
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": TRIGGER},
            "keep": {"type": "tool_uses", "value": 1},
            "exclude_tools": ["notes"],
        },
    ]
}


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream_server: FakeUpstream
) -> Iterator[ContextgateServer]:
    config = fake_model_list(
        tmp_path_factory.mktemp("models"), fake_upstream_server, names=(), anthropic=(CLAUDE,)
    )
    env = {
        "CONTEXTGATE_CONFIG": str(config),
        "CONTEXTGATE_CACHE_EXCLUDE_TOOLS": json.dumps(["operator_tool"]),
    }
    yield from module_server(tmp_path_factory, fake_upstream_server, env, name="editing")


@pytest.fixture
def client(server: ContextgateServer, fake_upstream: FakeUpstream) -> Iterator[anthropic.Anthropic]:
    sdk = anthropic.Anthropic(base_url=server.url, api_key="sk-any", max_retries=0, timeout=60)
    yield sdk
    sdk.close()


@pytest.fixture
def http(server: ContextgateServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def _result_text(step: int) -> str:
    return f"file {step}: " + " ".join(f"line{step}x{i} of the listing" for i in range(120))


def _upstream_results(body: dict[str, Any]) -> dict[str, str]:
    """Tool results as the upstream got them, by call id (Anthropic's blocks or chat's)."""
    results: dict[str, str] = {}
    for message in body["messages"]:
        if message.get("role") == "tool":
            content = message["content"]
            text = content if isinstance(content, str) else "".join(p["text"] for p in content)
            results[message["tool_call_id"]] = text
        elif isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    if not isinstance(content, str):
                        content = "".join(part["text"] for part in content)
                    results[block["tool_use_id"]] = content
    return results


def _thinking_sent(body: dict[str, Any]) -> int:
    return sum(
        1
        for message in body["messages"]
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "thinking"
    )


def _assistant(reply: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [b.model_dump(exclude_none=True) for b in reply.content],
    }


def _call(
    client: anthropic.Anthropic, model: str, history: list[Any], stream: bool
) -> tuple[Any, dict[str, Any]]:
    kwargs: Any = {
        "model": model,
        "max_tokens": 2048,
        "tools": TOOLS,
        "messages": history,
        "betas": [BETA],
        "context_management": EDITS,
    }
    if model == CLAUDE:
        kwargs["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    if not stream:
        reply = client.beta.messages.create(**kwargs)
        return reply, (reply.model_extra or {})["context_utilization"]
    with client.beta.messages.stream(**kwargs) as events:
        final = [event for event in events if event.type == "message_delta"]
        reply = events.get_final_message()  # context_management from the message_delta
    assert len(final) == 1
    assert final[0].context_management == reply.context_management
    return reply, (final[0].model_extra or {})["context_utilization"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("model", [CLAUDE, CHAT_MODEL])
def test_a_long_tool_loop_is_edited_by_contextgate(
    client: anthropic.Anthropic, fake_upstream: FakeUpstream, model: str, stream: bool
) -> None:
    history: list[Any] = [{"role": "user", "content": 'CALL_TOOL:read_file:{"n": 0}'}]
    names: dict[str, str] = {}  # call id -> tool
    sent: dict[str, str] = {}  # call id -> the result the client sent
    fired = False
    for step in range(STEPS):
        reply, utilization = _call(client, model, history, stream)
        body = fake_upstream.requests()[-1]
        assert "context_management" not in body["body"]
        assert BETA not in body["headers"].get("anthropic-beta", "")
        upstream = _upstream_results(body["body"])
        placeholders = {cid for cid, text in upstream.items() if text.startswith(PLACEHOLDER)}
        for cid in placeholders:
            assert upstream[cid].startswith(f"{PLACEHOLDER}'{names[cid]}' (call {cid},")
            assert names[cid] not in RAW_TOOLS
        for cid in set(upstream) - placeholders:
            assert upstream[cid] == sent[cid]  # the rest went as the client sent it

        applied = reply.context_management.applied_edits
        by_type = {edit.type: edit for edit in applied}
        stats = utilization["cache_stats"]
        if placeholders:
            fired = True
            cleared = by_type["clear_tool_uses_20250919"]
            assert cleared.cleared_tool_uses == len(placeholders) == stats["cleared_tool_results"]
            assert cleared.cleared_input_tokens == stats["cleared_tokens"] > 0
        else:
            assert "clear_tool_uses_20250919" not in by_type
            assert stats["cleared_tool_results"] == 0
        if model == CLAUDE and step:
            # Each earlier answer is a turn of its own (a user text follows it): its thinking
            # stays out of the prompt, as keep 1 asks; the fake would refuse a broken loop.
            assert _thinking_sent(body["body"]) == 0
            thinking = by_type["clear_thinking_20251015"]
            assert thinking.cleared_thinking_turns == step
            assert thinking.cleared_input_tokens > 0
        else:
            assert "clear_thinking_20251015" not in by_type

        call = next(block for block in reply.content if block.type == "tool_use")
        names[call.id] = call.name
        sent[call.id] = _result_text(step)
        assert call.name == TOOLS_BY_STEP[step]
        nxt = TOOLS_BY_STEP[(step + 1) % STEPS]
        history += [
            _assistant(reply),
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": sent[call.id]},
                    {"type": "text", "text": f'CALL_TOOL:{nxt}:{{"n": {step + 1}}}'},
                ],
            },
        ]
    assert fired, "the loop never reached the trigger"
    # The newest read_file result was kept raw; the protected tools' results never cleared.
    last = _upstream_results(fake_upstream.requests()[-1]["body"])
    by_tool = [(names[cid], text.startswith(PLACEHOLDER)) for cid, text in last.items()]
    assert ("notes", False) in by_tool
    assert ("operator_tool", False) in by_tool
    assert by_tool[-1] == ("read_file", False)
    assert ("read_file", True) in by_tool


def test_without_edits_no_context_management_is_answered(
    client: anthropic.Anthropic, http: httpx.Client
) -> None:
    reply = client.messages.create(
        model=CHAT_MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert "context_management" not in (reply.model_extra or {})
    plain = http.post(
        "/v1/messages",
        json={
            "model": CLAUDE,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
            "context_management": {"edits": []},
        },
        headers={"anthropic-beta": BETA},
    )
    assert plain.status_code == 200, plain.text
    assert plain.json()["context_management"] == {"applied_edits": []}


@pytest.mark.parametrize(
    "edit",
    [
        {"type": "clear_everything_20990101"},
        {"type": "clear_tool_uses_20250919", "keep": {"type": "input_tokens", "value": 3}},
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 0}},
        {"type": "clear_thinking_20251015", "keep": "most"},
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1000}},
    ],
)
def test_bad_edits_are_a_400_in_anthropics_envelope(
    http: httpx.Client, fake_upstream: FakeUpstream, edit: dict[str, Any]
) -> None:
    before = http.get("/v1/conversations", params={"limit": 100}).json()["data"]
    response = http.post(
        "/v1/messages",
        json={
            "model": CLAUDE,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
            "context_management": {"edits": [edit]},
        },
        headers={"anthropic-beta": BETA},
    )
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert "context_management" in error["error"]["message"]
    assert http.get("/v1/conversations", params={"limit": 100}).json()["data"] == before
    assert fake_upstream.requests() == []


def test_the_tool_loops_thinking_is_kept_and_older_turns_reported(
    client: anthropic.Anthropic, fake_upstream: FakeUpstream
) -> None:
    """A tool loop without user text between its calls keeps every answer's thinking (the fake
    refuses a loop whose last answer lacks it); once the next user message comes, that whole
    loop is one cleared thinking turn."""
    upstream_name = ANTHROPIC_LITELLM_MODEL.removeprefix("anthropic/")
    fake_upstream.script(
        upstream_name,
        [
            {"tool_calls": [{"name": "read_file", "arguments": json.dumps({"n": n})}]}
            for n in (1, 2)
        ],
    )
    management: Any = {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
        ]
    }
    kwargs: Any = {
        "model": CLAUDE, "max_tokens": 2048, "tools": TOOLS, "betas": [BETA],
        "thinking": {"type": "enabled", "budget_tokens": 1024}, "context_management": management,
    }  # fmt: skip
    history: list[Any] = [{"role": "user", "content": "Read two files."}]
    for step in range(3):
        reply = client.beta.messages.create(messages=history, **kwargs)
        assert reply.content[0].type == "thinking"
        assert reply.context_management.applied_edits == []
        assert _thinking_sent(fake_upstream.requests()[-1]["body"]) == step
        if step == 2:
            break
        call = next(block for block in reply.content if block.type == "tool_use")
        result = {"type": "tool_result", "tool_use_id": call.id, "content": "ok"}
        history += [_assistant(reply), {"role": "user", "content": [result]}]
    history += [_assistant(reply), {"role": "user", "content": "Thanks. Now sum them up."}]
    reply = client.beta.messages.create(messages=history, **kwargs)
    assert _thinking_sent(fake_upstream.requests()[-1]["body"]) == 0
    [edit] = reply.context_management.applied_edits
    assert edit.type == "clear_thinking_20251015"
    assert edit.cleared_thinking_turns == 1  # three answers, one turn
    assert edit.cleared_input_tokens > 0
