"""Issue 15.4: malformed input answers 400 with the field, never 500, never a 502 blamed on the
upstream, on SQLite and PostgreSQL alike, and the next request on the same connection works.

One real server per database (``database_url`` runs the test on both); one keep-alive HTTP
connection sends every bad request, each followed by a good one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fake_upstream import FakeUpstream
from tests.support.proxy import ContextgateServer

MASTER = "sk-master-malformed-7c1d"
MODEL = "gpt-4o-mini"
SURROGATE = "\ud800"
NUL = "\x00"


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], **extra}


def _with_call(function: dict[str, Any]) -> dict[str, Any]:
    return _chat(
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": function}],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ]
    )


TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}

# (what, method, path, JSON body, the param the answer must name)
CASES: list[tuple[str, str, str, Any, str]] = [
    ("content surrogate", "POST", "/v1/chat/completions",
     _chat(messages=[{"role": "user", "content": f"a{SURROGATE}b"}]), "messages.0.content"),
    ("content NUL", "POST", "/v1/chat/completions",
     _chat(messages=[{"role": "user", "content": f"a{NUL}b"}]), "messages.0.content"),
    ("content part NUL", "POST", "/v1/chat/completions",
     _chat(messages=[{"role": "user", "content": [{"type": "text", "text": NUL}]}]),
     "messages.0.content.0.text"),
    ("user surrogate", "POST", "/v1/chat/completions", _chat(user=SURROGATE), "user"),
    ("user NUL", "POST", "/v1/chat/completions", _chat(user=f"u{NUL}"), "user"),
    ("conversation_id surrogate", "POST", "/v1/chat/completions",
     _chat(conversation_id=f"conv_{SURROGATE}"), "conversation_id"),
    ("conversation_id NUL", "POST", "/v1/chat/completions",
     _chat(conversation_id=f"conv_{NUL}"), "conversation_id"),
    ("tool call name surrogate", "POST", "/v1/chat/completions",
     _with_call({"name": f"get{SURROGATE}", "arguments": "{}"}),
     "messages.1.tool_calls.0.function.name"),
    ("tool definition name NUL", "POST", "/v1/chat/completions",
     _chat(tools=[{**TOOL, "function": {"name": f"f{NUL}"}}]), "tools.0.function.name"),
    ("tool call name a number", "POST", "/v1/chat/completions",
     _with_call({"name": 42, "arguments": "{}"}), "messages.1.tool_calls"),
    ("tool call arguments an object", "POST", "/v1/chat/completions",
     _with_call({"name": "get_weather", "arguments": {"city": "Paris"}}),
     "messages.1.tool_calls"),
    ("attachment NUL", "POST", "/v1/chat/completions",
     _chat(attachments=[{"content": f"doc{NUL}", "title": "t"}]), "attachments.0.content"),
    ("extra field NUL", "POST", "/v1/chat/completions",
     _chat(metadata={"k": NUL}), "metadata.k"),
    ("memory NUL", "POST", "/v1/memories", {"user": "u1", "content": f"likes{NUL}tea"},
     "content"),
    ("memory user surrogate", "POST", "/v1/memories", {"user": SURROGATE, "content": "tea"},
     "user"),
    ("attachment upload NUL", "POST", "/v1/attachments",
     {"content": "text", "title": f"t{NUL}"}, "title"),
    ("key name NUL", "POST", "/v1/keys", {"name": f"k{NUL}"}, "name"),
    ("path NUL", "GET", "/v1/conversations/conv_%00x", None, "path"),
    ("path NUL, delete", "DELETE", "/v1/memories/mem_%00", None, "path"),
    ("query NUL", "GET", "/v1/conversations?user=%00", None, "query"),
]  # fmt: skip


@pytest.fixture
def server(
    database_url: str,
    fake_upstream: FakeUpstream,
    tmp_path: Any,
    request: pytest.FixtureRequest,
) -> Any:
    proxy = ContextgateServer(
        {
            "CONTEXTGATE_DATABASE_URL": database_url,
            "CONTEXTGATE_UPSTREAM_BASE_URL": fake_upstream.base_url,
            "CONTEXTGATE_MAX_RETRIES": "0",
            "CONTEXTGATE_MASTER_KEY": MASTER,
        },
        log_path=tmp_path / "server.log",
    )
    proxy.start()
    yield proxy
    proxy.stop()


def _send(http: httpx.Client, method: str, path: str, body: Any) -> httpx.Response:
    # json.dumps escapes a lone surrogate as \ud800 and NUL as \u0000, as a client would.
    content = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": "application/json"} if body is not None else {}
    return http.request(method, path, content=content, headers=headers)


def test_malformed_strings_answer_400_with_the_field_on_both_databases(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    count_calls: Callable[[], int] = lambda: fake_upstream.stats()["calls"]  # noqa: E731
    good = _chat()
    with httpx.Client(
        base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {MASTER}"}
    ) as http:
        for what, method, path, body, param in CASES:
            calls = count_calls()
            response = _send(http, method, path, body)
            assert response.status_code == 400, (what, response.status_code, response.text)
            error = response.json()["error"]
            assert error["param"] == param, (what, error)
            assert error["type"] == "invalid_request_error", (what, error)
            assert "upstream" not in error["message"].lower(), (what, error)
            assert count_calls() == calls, f"{what}: the upstream was called"
            # The same connection serves the next request.
            after = http.post("/v1/chat/completions", json=good)
            assert after.status_code == 200, (what, after.text)
        stored = http.get("/v1/conversations").json()["data"]
        # Only the good requests were stored (each its own new conversation or the same one).
        for conversation in stored:
            detail = http.get(f"/v1/conversations/{conversation['id']}").json()
            for message in detail["messages"]:
                assert NUL not in json.dumps(message["content"])
        assert http.get("/v1/memories", params={"user": "u1"}).json()["data"] == []
        assert http.get("/v1/attachments").status_code in (200, 405)


async def test_uploads_and_escaped_text(client: httpx.AsyncClient) -> None:
    """A text file with NUL is refused (param file), a multipart title too; the text
    ``\\u0000`` written out (an escaped backslash) is ordinary text and is stored."""
    files = {"file": ("notes.txt", b"line one\x00line two", "text/plain")}
    response = await client.post("/v1/attachments", files=files)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "file"
    files = {"file": ("notes.txt", b"fine", "text/plain")}
    response = await client.post("/v1/attachments", files=files, data={"title": f"t{NUL}"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "title"
    literal = json.dumps({"content": "a JSON escape looks like \\u0000 or \\ud800"}).encode()
    response = await client.post(
        "/v1/attachments", content=literal, headers={"content-type": "application/json"}
    )
    assert response.status_code == 201, response.text


async def test_integers_outside_64_bits_are_400_on_every_door(client: httpx.AsyncClient) -> None:
    """A 20-digit number anywhere in a body (a tool input on /v1/messages, a chat extra) is the
    client's 400, not a 500 from a serializer."""
    big = 57525901118819988170283679744
    anthropic = {
        "model": MODEL,
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"n": big}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
        ],
    }
    for path, body, param in (
        ("/v1/messages", anthropic, "messages.1.content.0.input.n"),
        ("/v1/chat/completions", _chat(metadata={"n": -big}), "metadata.n"),
    ):
        response = await client.post(path, json=body)
        assert response.status_code == 400, (path, response.text)
        assert "64-bit" in response.text
        assert param in response.text
    # 19-digit ids that fit, and long digit runs inside strings, are fine.
    ok = _chat(metadata={"n": 2**63 - 1, "s": "1" * 40})
    assert (await client.post("/v1/chat/completions", json=ok)).status_code == 200


def _deep(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def _anthropic(**extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }


def _tool_use(tool_input: Any) -> dict[str, Any]:
    return _anthropic(
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "f", "input": tool_input}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
        ]
    )  # fmt: skip


def _responses(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "input": "hi", **extra}


KEY = {SURROGATE: 1}
CHAT, MESSAGES, RESPONSES = "/v1/chat/completions", "/v1/messages", "/v1/responses"
# Issue 24.2-24.5: (what, path, JSON body, code or None). Each used to answer 500 (or a 502).
HOSTILE: list[tuple[str, str, Any, str | None]] = [
    *[(f"surrogate key {path}", path, {**body, **KEY}, "invalid_string") for path, body in (
        (CHAT, _chat()), (MESSAGES, _anthropic()), ("/v1/messages/count_tokens", _anthropic()),
        (RESPONSES, _responses()), ("/v1/embeddings", {"model": MODEL, "input": "x"}),
        ("/v1/memories", {"user": "u1", "content": "tea"}),
        ("/v1/attachments", {"content": "doc", "title": "t"}), ("/v1/keys", {"name": "k"}),
    )],
    ("surrogate key, nested", CHAT, _chat(metadata={"a": {f"k{SURROGATE}": 1}}), "invalid_string"),
    *[(f"depth {depth}", CHAT, _chat(metadata=_deep(depth)), "json_too_deep")
      for depth in (70, 255, 300)],
    *[(f"depth {depth}", CHAT, json.dumps(_chat(metadata="@")).encode().replace(
        b'"@"', b'{"a":' * depth + b"0" + b"}" * depth), "json_too_deep")
      for depth in (1000, 5000)],
    ("deep array", "/v1/embeddings", {"model": MODEL, "input": json.loads("[" * 300 + "]" * 300)},
     "json_too_deep"),
    ("deep tool parameters", CHAT,
     _chat(tools=[{**TOOL, "function": {"name": "f", "parameters": _deep(300)}}]), "json_too_deep"),
    ("deep input_schema", MESSAGES,
     _anthropic(tools=[{"name": "f", "input_schema": _deep(300)}]), "json_too_deep"),
    ("deep tool_use.input", MESSAGES, _tool_use(_deep(300)), "json_too_deep"),
    ("deep tool_use.input, streamed", MESSAGES, {**_tool_use(_deep(300)), "stream": True},
     "json_too_deep"),
    ("deep Responses tool", RESPONSES,
     _responses(tools=[{"type": "function", "name": "f", "parameters": _deep(300)}]),
     "json_too_deep"),
    ("empty content", MESSAGES, _anthropic(messages=[{"role": "user", "content": []}]), None),
    ("empty content, streamed", MESSAGES,
     _anthropic(messages=[{"role": "user", "content": []}], stream=True), None),
    ("empty content, count_tokens", "/v1/messages/count_tokens",
     _anthropic(messages=[{"role": "user", "content": []}]), None),
    ("empty content before the end", MESSAGES, _anthropic(messages=[
        {"role": "user", "content": "a"}, {"role": "assistant", "content": []},
        {"role": "user", "content": "b"}]), None),
    *[(f"namespace tools {tools!r}", RESPONSES,
       _responses(tools=[{"type": "namespace", "name": "n", "tools": tools}]), "invalid_tool")
      for tools in ("x", ["x"], [1], None, {"a": 1}, [[1]])],
    ("nested namespace", RESPONSES, _responses(tools=[{"type": "namespace", "name": "n",
        "tools": [{"type": "namespace", "name": "m", "tools": [2]}]}]), "invalid_tool"),
]  # fmt: skip


def test_hostile_structures_answer_400_on_every_door(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    """Keys with lone surrogates, JSON nested past every serializer, empty Anthropic content,
    namespace tools that are not lists of objects: a 400 in the door's envelope, no upstream
    call, nothing stored, and no unhandled error in the server's log; on both databases."""
    with httpx.Client(
        base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {MASTER}"}
    ) as http:
        for what, path, body, code in HOSTILE:
            calls = fake_upstream.stats()["calls"]
            response = _send(http, "POST", path, body)
            assert response.status_code == 400, (what, response.status_code, response.text)
            error = response.json()["error"]
            if path.startswith(MESSAGES):
                assert error["type"] == "invalid_request_error", (what, error)
            else:
                assert error["code"] == code or code is None, (what, error)
            assert "upstream" not in error["message"].lower(), (what, error)
            assert fake_upstream.stats()["calls"] == calls, f"{what}: the upstream was called"
        # An empty final assistant message (a prefill) is still fine, and so is JSON 60 deep.
        prefill = [{"role": "user", "content": "a"}, {"role": "assistant", "content": []}]
        assert _send(http, "POST", MESSAGES, _anthropic(messages=prefill)).status_code == 200
        assert _send(http, "POST", CHAT, _chat(metadata=_deep(60))).status_code == 200
        conversations = http.get("/v1/conversations").json()["data"]
        assert len(conversations) == 2, conversations
        assert http.get("/v1/memories", params={"user": "u1"}).json()["data"] == []
        assert [k["name"] for k in http.get("/v1/keys").json()["data"]] == []
    log = (server.log_path or Path()).read_text(errors="replace")
    assert "unhandled error" not in log
    assert "Traceback" not in log


BIG = "z" * 1_000_000
# Issue 24: values stored without a limit of their own (app/protocol/bounds.py).
UNBOUNDED: list[tuple[str, str, Any, str]] = [
    ("chat user", CHAT, _chat(user="u" * 201), "user"),
    ("chat user 8 MB", CHAT, _chat(user="u" * 8_000_000), "user"),
    ("Responses user", RESPONSES, _responses(user=BIG), "user"),
    ("Messages metadata.user_id", MESSAGES, _anthropic(metadata={"user_id": BIG}),
     "metadata.user_id"),
    ("embeddings user", "/v1/embeddings", {"model": MODEL, "input": "x", "user": BIG}, "user"),
    ("Responses metadata value", RESPONSES, _responses(metadata={"k": BIG}), "metadata"),
    ("Responses metadata pairs", RESPONSES,
     _responses(metadata={f"k{i}": "v" for i in range(17)}), "metadata"),
    ("Responses metadata key", RESPONSES, _responses(metadata={"k" * 65: "v"}), "metadata"),
    ("unknown field of an item", RESPONSES,
     _responses(input=[{"role": "user", "content": "hi", "extra": BIG}]), "input.0"),
    ("unknown field of a part", RESPONSES, _responses(input=[{"role": "user", "content": [
        {"type": "input_text", "text": "hi", "extra": BIG}]}]), "input.0.content.0"),
]  # fmt: skip


def test_values_without_a_limit_of_their_own_get_one(
    server: ContextgateServer, fake_upstream: FakeUpstream
) -> None:
    """An 8 MB ``user``, a metadata value, an unknown field of a stored item: 400 naming the
    field, nothing stored, on both databases; values at the limits are fine."""
    with httpx.Client(
        base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {MASTER}"}
    ) as http:
        for what, path, body, param in UNBOUNDED:
            calls = fake_upstream.stats()["calls"]
            response = _send(http, "POST", path, body)
            assert response.status_code == 400, (what, response.status_code, response.text[:300])
            assert param in response.text, (what, response.text[:300])
            assert fake_upstream.stats()["calls"] == calls, what
        assert http.get("/v1/conversations").json()["data"] == []
        at_limits = [
            (CHAT, _chat(user="u" * 200)),
            (RESPONSES, _responses(
                user="u" * 200, metadata={f"k{i}": "v" * 512 for i in range(16)},
                input=[{"role": "user", "content": "hi", "extra": "x" * 16000}])),
            (MESSAGES, _anthropic(metadata={"user_id": "u" * 200})),
        ]  # fmt: skip
        for path, body in at_limits:
            response = _send(http, "POST", path, body)
            assert response.status_code == 200, (path, response.text[:300])
