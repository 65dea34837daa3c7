"""A deterministic fake OpenAI-compatible upstream for end-to-end tests and benchmarks.

Run it with `python -m tests.fake_upstream --port 0` or, from tests, `FakeUpstream`:

    with FakeUpstream() as fake:
        client = openai.OpenAI(base_url=fake.base_url, api_key="sk-test")
        fake.script("fake-planner", ["first answer", {"content": "second", "delay_ms": 50}])
        fake.faults("*", [{"status": 429, "headers": {"Retry-After": "1"}}])

Default answers: "Echo: <last user text>"; "Tool results: a | b" after tool messages; "{}" for
response_format json_object/json_schema; reasoning_content for `reasoning_effort` or models whose
name contains "reasoner"; signed thinking_blocks too (litellm's shape for Anthropic) for models
whose name contains "thinker".
`POST /v1/responses` answers as OpenAI's Responses API does (openai_responses.py): reasoning
items with sealed `encrypted_content` for reasoning models, verified when sent back; hosted
`web_search` with `SEARCH:<query>`.

Directives in the last user message (each until end of line):
    CALL_TOOL:<name>:<json args>   with `tools` in the request: answer with that tool call.
    FAULT:<json fault>             apply that fault on every call that sees it.

A fault: {"status": 429, "headers": {...}, "body": {...}, "message": "..."}, {"hang": true},
{"delay_ms": 500}, {"drop_after_chunks": 3} (non-stream: half the body), {"chunk_delay_ms": 20},
{"status": 401, "quote_key": true} (the message quotes the key it got, as OpenAI's does),
{"content_type": "text/html", "body": "<html>…"} (that body with status 200 even to a stream),
{"end_early": true} (a stream's content, then a clean close: no finish_reason, no [DONE]),
{"error_after_chunks": 2, "quote_key": true} (a stream's first 2 events, the role and the first
word, then an SSE error event `data: {"error": …}`, its message quoting the key it got or
`message`; no [DONE]).
Per-request latency: header `X-Fake-Latency-Ms` (overrides `--latency-ms`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .server import FakeUpstream, FakeUpstreamError

__all__ = ["FakeUpstream", "FakeUpstreamError", "create_app"]


def __getattr__(name: str) -> Any:
    # Lazy, so that the server process (`python -m tests.fake_upstream`) never imports httpx.
    if name == "create_app":
        from .app import create_app

        return create_app
    if name in ("FakeUpstream", "FakeUpstreamError"):
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
