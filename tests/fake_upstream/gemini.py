"""The fake upstream's Gemini API (Google AI Studio): ``POST /v1beta/models/{model}:`` then
``generateContent`` or ``streamGenerateContent?alt=sse``, as litellm's ``gemini/`` provider calls
them with an ``api_base``.

It answers "Echo: <last user text>" with Gemini's ``usageMetadata``. Implicit caching, as Gemini
2.5 reports it: ``cachedContentTokenCount`` counts the longest prefix of this request (system
instruction, tools, then ``contents`` in order) that an earlier request to the same model had
(no minimum length, unlike Gemini); it is part of ``promptTokenCount``. Like Gemini it refuses
(400 INVALID_ARGUMENT) a request without ``contents`` and a content whose role is neither
``user`` nor ``model``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from .responses import ECHO_LIMIT, split_words

__all__ = ["Invalid", "answer_text", "check", "error_body", "response", "stream_events"]


class Invalid(Exception):
    """A request Gemini would refuse with 400."""


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND"}.get(
        status, "INTERNAL"
    )
    return {"error": {"code": status, "message": message, "status": kind}}


def check(body: dict[str, Any]) -> None:
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise Invalid("* GenerateContentRequest.contents: contents is not specified")
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role", "user") not in ("user", "model"):
            raise Invalid(f"Please use a valid role: user, model. (contents[{i}])")


def _text(content: dict[str, Any]) -> str:
    return " ".join(str(part.get("text", "")) for part in content.get("parts") or [])


def answer_text(body: dict[str, Any]) -> str:
    users = [c for c in body["contents"] if c.get("role", "user") == "user"]
    return f"Echo: {_text(users[-1])[:ECHO_LIMIT]}" if users else "Echo: "


def _tokens(value: Any) -> int:
    return len(orjson.dumps(value)) // 4 + 1


def _parts(body: dict[str, Any]) -> list[Any]:
    head = [body.get("system_instruction") or body.get("systemInstruction"), body.get("tools")]
    return [*head, *body["contents"]]


def cached_tokens(model: str, body: dict[str, Any], seen: set[str]) -> int:
    """Tokens of the longest prefix an earlier request to ``model`` had; remembers this one's."""
    parts = _parts(body)
    cached = 0
    previous = model.encode()
    for k, part in enumerate(parts):
        digest = hashlib.sha256(previous + orjson.dumps(part, option=orjson.OPT_SORT_KEYS))
        previous = digest.digest()
        key = "gemini:" + digest.hexdigest()
        if key in seen and k >= 2:  # a hit needs some contents, not just the instruction
            cached = _tokens(parts[: k + 1])
        seen.add(key)
    return cached


def usage_metadata(body: dict[str, Any], text: str, cached: int) -> dict[str, Any]:
    prompt = _tokens(_parts(body))
    output = len(text) // 4 + 1
    metadata: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if cached:
        metadata["cachedContentTokenCount"] = min(cached, prompt)
        metadata["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": min(cached, prompt)}]
    return metadata


def response(model: str, body: dict[str, Any], cached: int, n: int) -> dict[str, Any]:
    text = answer_text(body)
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": usage_metadata(body, text, cached),
        "modelVersion": model,
        "responseId": f"fake-gemini-{n}",
    }


def stream_events(model: str, body: dict[str, Any], cached: int, n: int) -> list[bytes]:
    """``alt=sse``: one GenerateContentResponse per word, the last with finishReason and the
    whole usage."""
    text = answer_text(body)
    words = split_words(text)
    events = []
    for i, word in enumerate(words):
        chunk: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": [{"text": word}]}, "index": 0}],
            "modelVersion": model,
            "responseId": f"fake-gemini-{n}",
        }
        if i == len(words) - 1:
            chunk["candidates"][0]["finishReason"] = "STOP"
            chunk["usageMetadata"] = usage_metadata(body, text, cached)
        events.append(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n")
    return events
