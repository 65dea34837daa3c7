"""The hostile requests of ``python -m bench.probe`` (issue 24), one list per probe.

Each case is ``(path, raw JSON body, extra headers, the status it must get)``; a status of 0
means "anything below 500". Bodies are bytes: Python's json writes lone surrogates and NUL as
escapes, and nesting deeper than its recursion limit is written out by hand.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["Case", "MODEL", "CLAUDE", "deep_bytes", "hostile_cases"]

MODEL = "gpt-4o-mini"
CLAUDE = "claude-fake"
Case = tuple[str, bytes, dict[str, str], int]
CHAT, MESSAGES, RESPONSES = "/v1/chat/completions", "/v1/messages", "/v1/responses"
BETA = {"anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14"}


def _raw(body: Any) -> bytes:
    return json.dumps(body).encode()


def deep_bytes(body: dict[str, Any], depth: int, as_list: bool = False) -> bytes:
    """``body`` with its "@" placeholder replaced by a value nested ``depth`` levels."""
    opening, closing = (b"[", b"]") if as_list else (b'{"a":', b"}")
    return _raw(body).replace(b'"@"', opening * depth + b"0" + closing * depth)


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "probe"}], **extra}


def _anthropic(**extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "probe"}],
    } | extra


def _responses(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "input": "probe", **extra}


def _tool_use(tool_input: Any, **extra: Any) -> dict[str, Any]:
    return _anthropic(messages=[
        {"role": "user", "content": "probe"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "f", "input": tool_input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
    ], **extra)  # fmt: skip


JSON_DOORS: list[tuple[str, dict[str, Any]]] = [
    (CHAT, _chat()), (CHAT, _chat(stream=True)), (MESSAGES, _anthropic()),
    (MESSAGES, _anthropic(stream=True)), ("/v1/messages/count_tokens", _anthropic()),
    (RESPONSES, _responses()), (RESPONSES, _responses(stream=True)),
    ("/v1/embeddings", {"model": MODEL, "input": "x"}),
    ("/v1/memories", {"user": "probe-user", "content": "tea"}),
    ("/v1/attachments", {"content": "doc", "title": "t"}), ("/v1/keys", {"name": "k"}),
]  # fmt: skip


def _surrogate_keys() -> list[Case]:
    cases = []
    for char in ("\ud800", "\udfff", "\x00"):
        for path, body in JSON_DOORS:
            cases.append((path, _raw({**body, f"k{char}": 1}), {}, 400))
        cases.append((CHAT, _raw(_chat(metadata={"a": {char: 1}})), {}, 400))
    return cases


DEPTHS = (65, 100, 254, 255, 256, 300, 500, 999, 1000, 1001, 5000)


def _depths() -> list[Case]:
    cases: list[Case] = []
    places = [
        (CHAT, _chat(metadata="@")),
        (CHAT, _chat(tools=[{"type": "function", "function": {"name": "f", "parameters": "@"}}])),
        (CHAT, _chat(stream=True, tools=[
            {"type": "function", "function": {"name": "f", "parameters": "@"}}])),
        (MESSAGES, _anthropic(tools=[{"name": "f", "input_schema": "@"}])),
        (MESSAGES, _tool_use("@")),
        (MESSAGES, _tool_use("@", stream=True)),
        (RESPONSES, _responses(tools=[{"type": "function", "name": "f", "parameters": "@"}])),
        (RESPONSES, _responses(stream=True, input=[
            {"role": "user", "content": "probe", "extra": "@"}])),
        ("/v1/embeddings", {"model": MODEL, "input": "@"}),
    ]  # fmt: skip
    for depth in DEPTHS:
        for path, body in places:
            cases.append((path, deep_bytes(body, depth), {}, 400))
        cases.append((CHAT, deep_bytes(_chat(metadata="@"), depth, as_list=True), {}, 400))
    for path, body in places[:2]:  # 60 levels are fine
        cases.append((path, deep_bytes(body, 60), {}, 200))
    return cases


def _empty_content() -> list[Case]:
    empty = [{"role": "user", "content": []}]
    middle = [{"role": "user", "content": "a"}, {"role": "assistant", "content": []},
              {"role": "user", "content": "b"}]  # fmt: skip
    prefill = [{"role": "user", "content": "a"}, {"role": "assistant", "content": []}]
    return [
        (MESSAGES, _raw(_anthropic(messages=empty)), {}, 400),
        (MESSAGES, _raw(_anthropic(messages=empty, stream=True)), {}, 400),
        (MESSAGES, _raw(_anthropic(messages=[{"role": "user", "content": ""}])), {}, 400),
        ("/v1/messages/count_tokens", _raw(_anthropic(messages=empty)), {}, 400),
        (MESSAGES, _raw(_anthropic(messages=middle)), {}, 400),
        (MESSAGES, _raw(_anthropic(messages=middle, stream=True)), {}, 400),
        (MESSAGES, _raw(_anthropic(messages=prefill)), {}, 200),
    ]


def _namespaces() -> list[Case]:
    cases: list[Case] = []
    for tools in ("x", ["x"], [1], None, {"a": 1}, [[1]], [None], True):
        for stream in (False, True):
            body = _responses(
                stream=stream, tools=[{"type": "namespace", "name": "n", "tools": tools}]
            )
            cases.append((RESPONSES, _raw(body), {}, 400))
    nested = [{"type": "namespace", "name": "m", "tools": [2]}]
    cases.append(
        (
            RESPONSES,
            _raw(_responses(tools=[{"type": "namespace", "name": "n", "tools": nested}])),
            {},
            400,
        )
    )
    ok = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    cases.append(
        (
            RESPONSES,
            _raw(_responses(tools=[{"type": "namespace", "name": "n", "tools": ok}])),
            {},
            200,
        )
    )
    return cases


def _offline() -> list[Case]:
    """Requests that used to make litellm reach out (the beta-headers map): each door with a
    Claude model (litellm's anthropic provider) and ``anthropic-beta``, and an OpenAI one."""
    cases: list[Case] = []
    for model in (CLAUDE, MODEL):
        chat = {"model": model, "messages": [{"role": "user", "content": "probe"}]}
        for stream in (False, True):
            cases += [
                (CHAT, _raw({**chat, "stream": stream}), BETA, 200),
                (MESSAGES, _raw({**chat, "max_tokens": 16, "stream": stream}), BETA, 200),
                (RESPONSES, _raw({"model": model, "input": "probe", "stream": stream}), BETA, 200),
            ]
        cases.append(("/v1/messages/count_tokens", _raw(chat), BETA, 200))
    return cases


def _sizes() -> list[Case]:
    big = "z" * 8_000_000
    return [
        (CHAT, _raw(_chat(user=big)), {}, 400),
        (RESPONSES, _raw(_responses(user=big)), {}, 400),
        (MESSAGES, _raw(_anthropic(metadata={"user_id": big})), {}, 400),
        ("/v1/embeddings", _raw({"model": MODEL, "input": "x", "user": big}), {}, 400),
        ("/v1/memories", _raw({"user": big, "content": "x"}), {}, 400),
        (RESPONSES, _raw(_responses(metadata={"k": big})), {}, 400),
        (RESPONSES, _raw(_responses(metadata={f"k{i}": "v" for i in range(17)})), {}, 400),
        (RESPONSES, _raw(_responses(input=[
            {"role": "user", "content": "x", "extra": big}])), {}, 400),
        (RESPONSES, _raw(_responses(input=[{"role": "user", "content": [
            {"type": "input_text", "text": "x", "extra": big}]}])), {}, 400),
        (CHAT, _raw(_chat(user="u" * 200)), {}, 200),
    ]  # fmt: skip


def hostile_cases() -> dict[str, list[Case]]:
    """Probe name → its requests (the secrets probe is built by the runner: it needs faults)."""
    return {
        "lone surrogate / NUL in a JSON key": _surrogate_keys(),
        "JSON nested 65-5,000 deep": _depths(),
        "`/v1/messages` empty content": _empty_content(),
        "Responses `namespace` tools not a list of objects": _namespaces(),
        "no outbound connect but the upstream (firewall)": _offline(),
        "stored values without a limit of their own": _sizes(),
    }
