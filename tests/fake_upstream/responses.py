"""Pure, deterministic builders for the fake upstream's OpenAI-shaped payloads."""

from __future__ import annotations

import base64
import hashlib
import math
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.tokens.counter import TokenCounter

CREATED = 1_700_000_000  # fixed so that every answer is byte-for-byte reproducible
FINGERPRINT = "fp_fake"
MODELS = ("fake-model", "gpt-4o-mini", "fake-planner", "fake-summarizer", "fake-embed")
ECHO_LIMIT = 200
TOKEN_SCALE = float(os.environ.get("FAKE_UPSTREAM_TOKEN_SCALE") or 1.0)
_COUNTER = TokenCounter()
EMBED_DIM = 64

_CALL_TOOL = re.compile(r"CALL_TOOL:([A-Za-z0-9_.\-]+):([^\r\n]*)")
_WORDS = re.compile(r"\S*\s*")
_TOKENS = re.compile(r"\w+")


@dataclass
class Answer:
    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str | None = None
    signed: bool = False

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def thinking_blocks(self) -> list[dict[str, Any]] | None:
        """For models named "*thinker*": the reasoning as one signed thinking block (litellm's
        shape for Anthropic), so tests can check it comes back byte-for-byte."""
        if self.reasoning is None or not self.signed:
            return None
        return [{"type": "thinking", "thinking": self.reasoning, "signature": sign(self.reasoning)}]


def sign(thinking: str) -> str:
    return "sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:24]


def content_text(content: Any) -> str:
    """Text of a message's content: a string, or the text parts of a list joined by spaces."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        return " ".join(parts)
    return str(content)


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    total = 0
    for message in messages:
        total += len(content_text(message.get("content"))) // 4 + 4
        if message.get("tool_calls"):
            total += len(orjson.dumps(message["tool_calls"])) // 4
    return total


def completion_tokens(answer: Answer) -> int:
    if answer.tool_calls:
        return len(orjson.dumps(answer.tool_calls)) // 4 + 1
    return len(answer.content or "") // 4 + 1


def provider_prompt_tokens(body: dict[str, Any], messages: list[Any] | None = None) -> int:
    """What an OpenAI-shaped provider bills as prompt tokens: the messages (``messages``: a
    prefix of them) and the tool definitions, counted with OpenAI's tokenizer (the one
    contextgate counts with, so the ratio is 1.0), times ``FAKE_UPSTREAM_TOKEN_SCALE`` to stand
    in for another provider's tokenizer (Claude's runs 20-35% above tiktoken)."""
    model = str(body.get("model") or "gpt-4o-mini")
    sent = body.get("messages") or [] if messages is None else messages
    total = _COUNTER.count_messages(sent, model)
    if body.get("tools"):
        total += _COUNTER.count_text(orjson.dumps(body["tools"]).decode(), model)
    return round(total * TOKEN_SCALE)


def usage(body: dict[str, Any], answer: Answer, cached: int = 0) -> dict[str, Any]:
    prompt = provider_prompt_tokens(body)
    completion = completion_tokens(answer)
    result: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:  # OpenAI's automatic prompt cache (cached_prompt_tokens)
        result["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
    return result


def cached_prompt_tokens(body: dict[str, Any], seen: set[str]) -> int:
    """OpenAI's automatic prompt cache, for models whose name contains "cacher" (others report
    none): the longest message prefix of this prompt (tools included) that an earlier prompt
    to the same model had, counted as ``prompt_tokens`` counts it. Every prefix is remembered."""
    model = str(body.get("model", ""))
    if "cacher" not in model:
        return 0
    messages = body.get("messages") or []
    cached = 0
    for k in range(1, len(messages) + 1):
        head = orjson.dumps([model, body.get("tools"), messages[:k]], option=orjson.OPT_SORT_KEYS)
        key = "openai:" + hashlib.sha256(head).hexdigest()
        if key in seen:
            cached = provider_prompt_tokens(body, messages[:k])
        seen.add(key)
    return cached


def _tool_call(n: int, name: str, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = orjson.dumps(arguments).decode()
    return {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def plan_answer(body: dict[str, Any], scripted: dict[str, Any] | None, next_call_id: Any) -> Answer:
    """Decide what to answer: script > CALL_TOOL > json response_format > tool results > echo."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    user_text = last_user_text(messages)
    reasoning = None
    model = str(body.get("model", ""))
    signed = "thinker" in model
    if body.get("reasoning_effort") is not None or "reasoner" in model or signed:
        reasoning = f"Thinking about: {user_text[:50]}"
    answer = _plan(body, scripted, next_call_id, messages, last, user_text, reasoning)
    answer.signed = signed
    return answer


def _plan(
    body: dict[str, Any],
    scripted: dict[str, Any] | None,
    next_call_id: Any,
    messages: list[dict[str, Any]],
    last: dict[str, Any],
    user_text: str,
    reasoning: str | None,
) -> Answer:
    if scripted is not None:
        calls = [
            _tool_call(next_call_id(), tc["name"], tc.get("arguments", "{}"))
            for tc in scripted.get("tool_calls") or []
        ]
        content = scripted.get("content")
        return Answer(None if calls and not content else (content or ""), calls, reasoning)
    if last.get("role") in ("user", "tool") and body.get("tools"):
        # After a user message, or (an agent's tool loop) after a tool result that asks.
        match = _CALL_TOOL.search(content_text(last.get("content")))
        if match:
            call = _tool_call(next_call_id(), match.group(1), match.group(2).strip())
            return Answer(None, [call], reasoning)
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        return Answer("{}", [], reasoning)
    if last.get("role") == "tool":
        results = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            results.append(content_text(message.get("content")))
        text = " | ".join(reversed(results))
        return Answer(f"Tool results: {text[:ECHO_LIMIT]}", [], reasoning)
    return Answer(f"Echo: {user_text[:ECHO_LIMIT]}", [], reasoning)


def _message(answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.content, "refusal": None}
    if answer.reasoning is not None:
        message["reasoning_content"] = answer.reasoning
    if answer.thinking_blocks:
        message["thinking_blocks"] = answer.thinking_blocks
    if answer.tool_calls:
        message["tool_calls"] = answer.tool_calls
    message["annotations"] = []
    return message


def completion(body: dict[str, Any], answer: Answer, n: int, cached: int = 0) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": CREATED,
        "model": body.get("model", ""),
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": _message(answer),
                "logprobs": None,
                "finish_reason": answer.finish_reason,
            }
        ],
        "usage": usage(body, answer, cached),
    }


def split_words(text: str) -> list[str]:
    """Each piece is one word plus the whitespace after it; joining them gives `text` back."""
    return [w for w in _WORDS.findall(text) if w]


def stream_events(body: dict[str, Any], answer: Answer, n: int, cached: int = 0) -> list[bytes]:
    """Every SSE event of a streamed answer, in order, ending with `data: [DONE]`."""
    with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": body.get("model", ""),
        "system_fingerprint": FINGERPRINT,
    }
    deltas: list[dict[str, Any]] = [
        {"role": "assistant", "content": None if answer.tool_calls else "", "refusal": None}
    ]
    deltas += [{"reasoning_content": w} for w in split_words(answer.reasoning or "")]
    if answer.thinking_blocks:  # as litellm streams Anthropic's: text pieces, then the signature
        for block in answer.thinking_blocks:
            deltas += [
                {"thinking_blocks": [{"type": "thinking", "thinking": w}]}
                for w in split_words(block["thinking"])
            ]
            deltas.append(
                {
                    "thinking_blocks": [
                        {"type": "thinking", "thinking": "", "signature": block["signature"]}
                    ]
                }
            )
    deltas += [{"content": w} for w in split_words(answer.content or "")]
    for index, call in enumerate(answer.tool_calls):
        fn = call["function"]
        head = {"name": fn["name"], "arguments": ""}
        deltas.append(
            {
                "tool_calls": [
                    {"index": index, "id": call["id"], "type": "function", "function": head}
                ]
            }
        )
        args = fn["arguments"]
        for i in range(0, len(args), 8):
            deltas.append(
                {"tool_calls": [{"index": index, "function": {"arguments": args[i : i + 8]}}]}
            )
    events = []
    finals: list[tuple[dict[str, Any], str | None]] = [(d, None) for d in deltas]
    finals.append(({}, answer.finish_reason))
    for delta, finish in finals:
        chunk = {
            **base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if with_usage:
            chunk["usage"] = None
        events.append(sse(chunk))
    if with_usage:
        events.append(sse({**base, "choices": [], "usage": usage(body, answer, cached)}))
    events.append(b"data: [DONE]\n\n")
    return events


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def error_body(status: int, message: str | None = None, code: str | None = None) -> dict[str, Any]:
    kind, default_code, default_message = {
        400: ("invalid_request_error", None, "Bad request."),
        401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
        403: ("permission_error", None, "Forbidden."),
        404: ("invalid_request_error", "model_not_found", "Not found."),
        429: ("requests", "rate_limit_exceeded", "Rate limit reached (fake upstream)."),
    }.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None, "Fake error.")
    )
    return {
        "error": {
            "message": message or f"{default_message} (status {status})",
            "type": kind,
            "param": None,
            "code": code if code is not None else default_code,
        }
    }


def embed_text(text: str, dim: int = EMBED_DIM) -> list[float]:
    """Hashed bag of lowercase words, L2-normalised: shared words give a high cosine."""
    vec = [0.0] * dim
    for word in _TOKENS.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vec[int.from_bytes(digest, "little") % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def embeddings(body: dict[str, Any]) -> dict[str, Any]:
    raw = body.get("input", "")
    if isinstance(raw, str) or (isinstance(raw, list) and raw and isinstance(raw[0], int)):
        raw = [raw]
    texts = [x if isinstance(x, str) else " ".join(str(t) for t in x) for x in raw]
    dim = int(body.get("dimensions") or EMBED_DIM)
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for i, text in enumerate(texts):
        vec: Any = embed_text(text, dim)
        if as_base64:
            vec = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
        data.append({"object": "embedding", "index": i, "embedding": vec})
    tokens = sum(len(t) // 4 + 1 for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model", ""),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def models() -> dict[str, Any]:
    data = [{"id": m, "object": "model", "created": CREATED, "owned_by": "fake"} for m in MODELS]
    return {"object": "list", "data": data}
