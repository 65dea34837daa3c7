"""``/demo/v1``: the demo model as an OpenAI-compatible server, mounted only with ``--demo``.

contextgate reaches it like any upstream (``CONTEXTGATE_UPSTREAM_BASE_URL`` points here), so
every request goes through the real pipeline: routing, the HTTP client, storage, the context
engine, memory and the inspector.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from typing import TypedDict

import orjson
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from app.demo.model import DEMO_CREATED, DEMO_MODELS, DemoRequest, answer, embed, usage
from app.wire.chat import ChatChoice, ChatCompletion, ChatMessage, ChatUsage, ToolCall
from app.wire.stream import ChatChunk, ChunkChoice, Delta, ToolCallDelta

__all__ = ["DEMO_PREFIX", "install_demo"]

DEMO_PREFIX = "/demo/v1"
router = APIRouter(prefix=DEMO_PREFIX, include_in_schema=False)
_PIECES = re.compile(r"\S+\s*")


class _Head(TypedDict):
    """What every answer and chunk of one completion starts with."""

    id: str
    created: int
    model: str
    system_fingerprint: str


def _chunk(base: _Head, choices: list[ChunkChoice]) -> ChatChunk:
    return {
        "id": base["id"],
        "created": base["created"],
        "model": base["model"],
        "system_fingerprint": base["system_fingerprint"],
        "object": "chat.completion.chunk",
        "choices": choices,
    }


def _json(payload: object, status_code: int = 200) -> Response:
    return Response(orjson.dumps(payload), status_code, media_type="application/json")


def _completion_id(body: DemoRequest) -> str:
    return "chatcmpl-demo" + hashlib.sha256(orjson.dumps(body.get("messages"))).hexdigest()[:20]


@router.get("/models")
async def models() -> Response:
    data = [
        {"id": name, "object": "model", "created": DEMO_CREATED, "owned_by": "contextgate-demo"}
        for name in DEMO_MODELS
    ]
    return _json({"object": "list", "data": data})


@router.post("/chat/completions", response_model=None)
async def chat_completions(request: Request) -> Response:
    try:
        body: DemoRequest = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return _json(
            {"error": {"message": "body is not JSON", "type": "invalid_request_error"}}, 400
        )
    content, tool_calls = answer(body)
    counted = usage(body, content, tool_calls)
    base: _Head = {
        "id": _completion_id(body),
        "created": DEMO_CREATED,
        "model": str(body.get("model") or "demo"),
        "system_fingerprint": "fp_demo",
    }
    finish = "tool_calls" if tool_calls else "stop"
    if body.get("stream"):
        return StreamingResponse(
            _events(base, content, tool_calls, finish, counted, body),
            media_type="text/event-stream",
        )
    message: ChatMessage = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choice: ChatChoice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    completion: ChatCompletion = {
        **base,
        "object": "chat.completion",
        "choices": [choice],
        "usage": counted,
    }
    return _json(completion)


async def _events(
    base: _Head,
    content: str | None,
    tool_calls: list[ToolCall],
    finish: str,
    counted: ChatUsage,
    body: DemoRequest,
) -> AsyncIterator[bytes]:
    def chunk(delta: Delta, reason: str | None = None) -> bytes:
        choice: ChunkChoice = {
            "index": 0,
            "delta": delta,
            "finish_reason": reason,
            "logprobs": None,
        }
        return b"data: " + orjson.dumps(_chunk(base, [choice])) + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in _PIECES.findall(content or ""):
        yield chunk({"content": piece})
    for index, call in enumerate(tool_calls):
        call_delta: ToolCallDelta = {
            "index": index,
            "id": str(call["id"]),
            "type": "function",
            "function": {**call["function"]},
        }
        yield chunk({"tool_calls": [call_delta]})
    yield chunk({}, finish)
    if (body.get("stream_options") or {}).get("include_usage"):
        last = _chunk(base, [])
        last["usage"] = counted
        yield b"data: " + orjson.dumps(last) + b"\n\n"
    yield b"data: [DONE]\n\n"


@router.post("/embeddings")
async def embeddings(request: Request) -> Response:
    body = orjson.loads(await request.body())
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else list(texts or [])
    data = [
        {"object": "embedding", "index": i, "embedding": embed(str(text))}
        for i, text in enumerate(texts)
    ]
    tokens = sum(len(str(text).split()) for text in texts)
    return _json(
        {
            "object": "list",
            "data": data,
            "model": str(body.get("model") or "demo"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def install_demo(app: FastAPI) -> None:
    app.include_router(router)
