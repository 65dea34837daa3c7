"""A deterministic, fast, OpenAI-compatible fake upstream (Starlette).

Endpoints: /health, /v1/models, /v1/chat/completions, /v1/embeddings, Anthropic's
/v1/messages (anthropic.py), OpenAI's /v1/responses (openai_responses.py) and the control API
under /_fake/ (script, faults, requests, reset, stats). See tests/fake_upstream/__init__.py.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import anthropic as a
from . import openai_responses as o
from . import responses as r
from .faults import HANG_SECONDS, FakeResponse, Hooks, directive_fault

LATENCY_HEADER = "x-fake-latency-ms"
Reply = Response | FakeResponse


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json(r.error_body(status, message), status)


class FakeState:
    def __init__(self, latency_ms: float = 0.0) -> None:
        self.latency_ms = latency_ms
        self.hooks = Hooks()
        self.reset()

    def reset(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.scripts: defaultdict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self.faults: defaultdict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self.calls = 0
        self.completions = 0
        self.call_ids = 0
        self.cache_prefixes: set[str] = set()
        self.hooks.disconnects = 0  # active_streams stays a live gauge

    def next_call_id(self) -> int:
        self.call_ids += 1
        return self.call_ids

    def next_completion(self) -> int:
        self.completions += 1
        return self.completions

    def pop_fault(self, model: str) -> dict[str, Any] | None:
        for key in (model, "*"):
            queue = self.faults.get(key)
            if queue:
                return queue.popleft()
        return None

    def pop_script(self, model: str) -> dict[str, Any] | None:
        queue = self.scripts.get(model)
        return queue.popleft() if queue else None

    def record(self, request: Request, body: Any) -> None:
        self.calls += 1
        self.records.append(
            {
                "method": request.method,
                "path": request.url.path,
                "headers": dict(request.headers),
                "body": body,
            }
        )


def _state(request: Request) -> FakeState:
    state: FakeState = request.app.state.fake
    return state


async def _read(request: Request) -> tuple[FakeState, Any, Response | None]:
    """Record the call, then the early answers: 401 for `Bearer reject-me`, 400 for bad JSON."""
    state = _state(request)
    raw = await request.body()
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        body = raw.decode("utf-8", "replace")
    state.record(request, body)
    if request.headers.get("authorization") == "Bearer reject-me":
        return state, body, _error(401, "Incorrect API key provided: reject-me.")
    if not isinstance(body, dict):
        return state, body, _error(400, "The request body must be a JSON object.")
    return state, body, None


def _delay_ms(request: Request, state: FakeState, fault: dict[str, Any]) -> float:
    """Latency (header, else --latency-ms) + the fault's delay_ms; a hang adds an hour."""
    header = request.headers.get(LATENCY_HEADER)
    latency = float(header) if header else state.latency_ms
    hang = HANG_SECONDS * 1000 if fault.get("hang") else 0.0
    return latency + float(fault.get("delay_ms") or 0) + hang


def _quoting_key(request: Request) -> str:
    key = request.headers.get("authorization", "").removeprefix("Bearer ")
    return f"Incorrect API key provided: {key}. You can find your API key at …"


def _fault_response(
    state: FakeState, fault: dict[str, Any], delay_ms: float, request: Request
) -> Reply | None:
    """The error answer a fault with a `status` asks for; None when the call should go on.

    `quote_key` answers as OpenAI does to a wrong key: the message quotes the key it got.
    `content_type` sends the body under that type (status 200 unless given), even to a
    streamed request: e.g. a proxy's HTML page, or a JSON error with a 200 status."""
    if fault.get("status") is None and fault.get("content_type") is None:
        return None
    status = int(fault.get("status") or 200)
    body = fault.get("body")
    message = fault.get("message")
    if fault.get("quote_key"):
        message = _quoting_key(request)
    if body is None:
        body = r.error_body(status, message, fault.get("code"))
    payload = body.encode() if isinstance(body, str) else orjson.dumps(body)
    headers = fault.get("headers")
    return FakeResponse(
        state.hooks,
        body=payload,
        status=status,
        headers=headers,
        delay=delay_ms / 1000,
        content_type=fault.get("content_type") or "application/json",
    )


def _merge(*faults: dict[str, Any] | None) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for fault in faults:
        merged.update(fault or {})
    return merged


async def chat_completions(request: Request) -> Reply:
    state, body, early = await _read(request)
    if early is not None:
        return early
    messages = body.get("messages")
    if not isinstance(messages, list):
        return _error(400, "'messages' must be a list.")
    if "context_management" in body:  # Anthropic's, unknown to OpenAI's Chat Completions
        return _error(400, "Unrecognized request argument supplied: context_management")
    model = str(body.get("model", ""))
    fault = _merge(state.pop_fault(model), directive_fault(r.last_user_text(messages)))
    delay_ms = _delay_ms(request, state, fault)
    failure = _fault_response(state, fault, delay_ms, request)
    if failure is not None:
        return failure
    scripted = state.pop_script(model)
    if scripted is not None:
        delay_ms += float(scripted.get("delay_ms") or 0)
    answer = r.plan_answer(body, scripted, state.next_call_id)
    n = state.next_completion()
    drop = fault.get("drop_after_chunks")
    common: dict[str, Any] = {
        "delay": delay_ms / 1000,
        "drop_after": None if drop is None else int(drop),
    }
    if body.get("stream"):
        chunk_delay = float(
            fault.get("chunk_delay_ms") or (scripted or {}).get("chunk_delay_ms") or 0
        )
        events = r.stream_events(body, answer, n)
        if fault.get("end_early"):  # the content, then a clean close: no finish, no [DONE]
            events = [
                e for e in events if b'"finish_reason":null' in e and b'"choices":[]' not in e
            ]
        after = fault.get("error_after_chunks")
        if after is not None:  # a stream broken off by an error event, as OpenAI sends one
            message = _quoting_key(request) if fault.get("quote_key") else fault.get("message")
            error = r.error_body(int(fault.get("error_status") or 500), message)
            events = [*events[: int(after)], r.sse(error)]
        return FakeResponse(state.hooks, events=events, chunk_delay=chunk_delay / 1000, **common)
    payload = orjson.dumps(r.completion(body, answer, n))
    return FakeResponse(state.hooks, body=payload, **common)


async def anthropic_messages(request: Request) -> Reply:
    """Anthropic's Messages API (see anthropic.py): checks, then a JSON or SSE answer."""
    state = _state(request)
    raw = await request.body()
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        body = None
    state.record(request, body)
    if request.headers.get("x-api-key") == "reject-me":
        return _json(a.error_body(401, "invalid x-api-key"), 401)
    if not isinstance(body, dict):
        return _json(a.error_body(400, "The request body must be a JSON object."), 400)
    try:
        a.check(body, request.headers.get("anthropic-beta", ""))
    except a.Invalid as exc:
        return _json(a.error_body(400, str(exc)), 400)
    model = str(body["model"])
    user_text = a.text_of(body["messages"][-1].get("content"))
    fault = _merge(state.pop_fault(model), directive_fault(user_text))
    delay_ms = _delay_ms(request, state, fault)
    if fault.get("status") is not None:
        status = int(fault["status"])
        payload = orjson.dumps(fault.get("body") or a.error_body(status, fault.get("message")))
        return FakeResponse(
            state.hooks, body=payload, status=status, headers=fault.get("headers"),
            delay=delay_ms / 1000,
        )  # fmt: skip
    scripted = state.pop_script(model)
    reply = a.plan(body, scripted, state.next_call_id)
    used = a.usage(body, reply, state.cache_prefixes)
    n = state.next_completion()
    drop = fault.get("drop_after_chunks")
    common: dict[str, Any] = {
        "delay": delay_ms / 1000,
        "drop_after": None if drop is None else int(drop),
    }
    if body.get("stream"):
        chunk_delay = float(fault.get("chunk_delay_ms") or 0) / 1000
        events = a.stream_events(body, reply, n, used)
        return FakeResponse(state.hooks, events=events, chunk_delay=chunk_delay, **common)
    return FakeResponse(state.hooks, body=orjson.dumps(a.message(body, reply, n, used)), **common)


async def responses_api(request: Request) -> Reply:
    """OpenAI's Responses API (see openai_responses.py): checks, then a JSON or SSE answer."""
    state, body, early = await _read(request)
    if early is not None:
        return early
    model = str(body.get("model", ""))
    fault = _merge(state.pop_fault(model))
    delay_ms = _delay_ms(request, state, fault)
    failure = _fault_response(state, fault, delay_ms, request)
    if failure is not None:
        return failure
    try:
        o.check(body)
    except o.Invalid as exc:
        return _json(exc.body(), exc.status)
    n = state.next_completion()
    reply = o.plan(body, n, state.next_call_id)
    if body.get("stream"):
        events = o.stream_events(body, reply, n)
        chunk_delay = float(fault.get("chunk_delay_ms") or 0) / 1000
        return FakeResponse(
            state.hooks, events=events, delay=delay_ms / 1000, chunk_delay=chunk_delay
        )
    payload = orjson.dumps(o.response(body, reply, n))
    return FakeResponse(state.hooks, body=payload, delay=delay_ms / 1000)


async def embeddings(request: Request) -> Reply:
    state, body, early = await _read(request)
    if early is not None:
        return early
    fault = _merge(state.pop_fault(str(body.get("model", ""))))
    delay_ms = _delay_ms(request, state, fault)
    failure = _fault_response(state, fault, delay_ms, request)
    if failure is not None:
        return failure
    payload = orjson.dumps(r.embeddings(body))
    return FakeResponse(state.hooks, body=payload, delay=delay_ms / 1000)


async def health(request: Request) -> Response:
    return _json({"ok": True})


async def list_models(request: Request) -> Response:
    return _json(r.models())


async def _control_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


async def script(request: Request) -> Response:
    body = await _control_body(request)
    items = body.get("responses")
    if not isinstance(body.get("model"), str) or not isinstance(items, list):
        return _error(400, "Expected {'model': str, 'responses': [str | {'content': ...}]}.")
    queue = _state(request).scripts[body["model"]]
    for item in items:
        if not isinstance(item, (str, dict)):
            return _error(400, f"A scripted response must be a string or an object: {item!r}")
        queue.append({"content": item} if isinstance(item, str) else item)
    return _json({"ok": True, "queued": len(queue)})


async def faults(request: Request) -> Response:
    body = await _control_body(request)
    items = body.get("faults")
    if not isinstance(body.get("model"), str) or not isinstance(items, list):
        return _error(400, "Expected {'model': str, 'faults': [{...}]}.")
    if not all(isinstance(item, dict) for item in items):
        return _error(400, "Every fault must be an object.")
    queue = _state(request).faults[body["model"]]
    queue.extend(items)
    return _json({"ok": True, "queued": len(queue)})


async def recorded(request: Request) -> Response:
    return _json(_state(request).records)


async def reset(request: Request) -> Response:
    _state(request).reset()
    return _json({"ok": True})


async def stats(request: Request) -> Response:
    state = _state(request)
    hooks = state.hooks
    return _json(
        {
            "calls": state.calls,
            "disconnects": hooks.disconnects,
            "active_streams": hooks.active_streams,
        }
    )


def create_app(latency_ms: float = 0.0) -> Starlette:
    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/v1/messages", anthropic_messages, methods=["POST"]),
        Route("/v1/responses", responses_api, methods=["POST"]),
        Route("/openai/responses", responses_api, methods=["POST"]),  # Azure OpenAI's path
        Route("/_fake/script", script, methods=["POST"]),
        Route("/_fake/faults", faults, methods=["POST"]),
        Route("/_fake/requests", recorded, methods=["GET"]),
        Route("/_fake/reset", reset, methods=["POST"]),
        Route("/_fake/stats", stats, methods=["GET"]),
    ]
    app = Starlette(routes=routes)
    app.state.fake = FakeState(latency_ms)
    return app


app = create_app()
