"""The fake upstream's OpenAI Responses API, ``POST /v1/responses`` (pure builders and checks).

It answers as OpenAI does for a reasoning model (o-series and gpt-5 names, a name containing
"reasoner", or any request with ``reasoning``): a ``reasoning`` item first, its
``encrypted_content`` only when ``include`` asks for ``reasoning.encrypted_content``, then a
message or function calls. Like
OpenAI it refuses (400) what a proxy could get wrong:

- a reasoning item sent back whose ``encrypted_content`` it did not issue, or issued for
  another model, or altered ("could not be verified");
- a reasoning item without ``encrypted_content`` with ``store: false`` (404: not persisted);
- a reasoning item not followed by another item ("without its required following item");
- ``include: ["reasoning.encrypted_content"]`` for a model that does not reason;
- ``previous_response_id`` (nothing is ever stored here: 404);
- a ``function_call_output`` without its ``function_call`` in the input.

Hosted tools: with a ``web_search`` (or ``web_search_preview``) tool and ``SEARCH:<query>`` in
the last user text, the answer holds a ``web_search_call`` item and a message citing a URL.
``CALL_TOOL:<name>:<json>`` asks for a function call (with function tools), as on chat.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from .responses import CREATED, ECHO_LIMIT, split_words

SECRET = b"fake-openai-reasoning-key"
ENCRYPTED = "reasoning.encrypted_content"
_CALL_TOOL = re.compile(r"CALL_TOOL:([A-Za-z0-9_.\-]+):([^\r\n]*)")
_SEARCH = re.compile(r"SEARCH:([^\r\n]*)")
_HOSTED_SEARCH = ("web_search", "web_search_preview")


class Invalid(Exception):
    """A request OpenAI would refuse; ``status`` 400 or 404."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": str(self),
                "type": "invalid_request_error",
                "param": self.param,
                "code": None,
            }
        }


# ---- encrypted reasoning ----------------------------------------------------------------


def seal(model: str, item_id: str, text: str) -> str:
    """Opaque to clients; bound to the model and the item, signed (HMAC)."""
    payload = base64.urlsafe_b64encode(orjson.dumps({"m": model, "id": item_id, "t": text}))
    mac = hmac.new(SECRET, payload, hashlib.sha256).hexdigest()
    return "gAAAAB" + payload.decode() + "." + mac


def unseal(value: str) -> dict[str, Any] | None:
    if not value.startswith("gAAAAB") or "." not in value:
        return None
    payload, mac = value[6:].rsplit(".", 1)
    expected = hmac.new(SECRET, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(payload))
    except (binascii.Error, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ---- reading a request ------------------------------------------------------------------


_REASONING_MODEL = re.compile(r"reasoner|^o\d|^gpt-5")


def reasons(body: dict[str, Any]) -> bool:
    """OpenAI's reasoning models (o-series, gpt-5…), "*reasoner*", or any ``reasoning``."""
    return bool(_REASONING_MODEL.search(str(body.get("model", "")))) or bool(body.get("reasoning"))


def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    return [item for item in raw or [] if isinstance(item, dict)]


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(
        str(part.get("text", ""))
        for part in content or []
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text")
    )


def check(body: dict[str, Any]) -> None:
    """Raise Invalid for what OpenAI refuses (module docstring)."""
    model = str(body.get("model") or "")
    if not model or body.get("input") is None:
        raise Invalid("'model' and 'input' are required.")
    if body.get("previous_response_id"):
        previous = body["previous_response_id"]
        raise Invalid(f"Previous response with id '{previous}' not found.", status=404)
    include = body.get("include") or []
    if ENCRYPTED in include and not reasons(body):
        raise Invalid("Encrypted content is not supported with this model.", param="include")
    items = _items(body)
    calls = {item.get("call_id") for item in items if item.get("type") == "function_call"}
    for index, item in enumerate(items):
        where = f"input[{index}]"
        kind = item.get("type", "message")
        if kind == "function_call_output" and item.get("call_id") not in calls:
            raise Invalid(
                f"No tool call found for function call output with call_id {item.get('call_id')}.",
                param=where,
            )
        if kind != "reasoning":
            continue
        encrypted = item.get("encrypted_content")
        if not encrypted:
            if body.get("store") is False:
                raise Invalid(
                    f"Item with id '{item.get('id')}' not found. Items are not persisted when "
                    "`store` is set to false. Try again with `store` set to true, or remove "
                    "this item from your input.",
                    status=404,
                    param="input",
                )
            continue
        sealed = unseal(str(encrypted))
        if sealed is None or sealed.get("m") != model or sealed.get("id") != item.get("id"):
            raise Invalid(
                f"The encrypted content for item {item.get('id')} could not be verified.",
                param=where,
            )
        following = items[index + 1] if index + 1 < len(items) else None
        if following is None or following.get("type") == "reasoning":
            raise Invalid(
                f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                "required following item.",
                param="input",
            )


# ---- answering --------------------------------------------------------------------------


@dataclass
class Reply:
    items: list[dict[str, Any]] = field(default_factory=list)
    reasoning_text: str | None = None


def _last_user(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        if item.get("type", "message") == "message" and item.get("role") == "user":
            return text_of(item.get("content"))
    return ""


def _message(n: int, text: str, annotations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": f"msg_fake{n}",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": annotations or []}],
    }


def plan(body: dict[str, Any], n: int, next_call_id: Any) -> Reply:
    items = _items(body)
    user = _last_user(items)
    model = str(body["model"])
    reply = Reply()
    carried = sum(1 for item in items if item.get("type") == "reasoning")
    if reasons(body):
        text = f"Thinking about: {user[:50]}"
        reasoning: dict[str, Any] = {"id": f"rs_fake{n}", "type": "reasoning", "summary": []}
        if (body.get("reasoning") or {}).get("summary"):
            reasoning["summary"] = [{"type": "summary_text", "text": text}]
        if ENCRYPTED in (body.get("include") or []):
            reasoning["encrypted_content"] = seal(model, reasoning["id"], text)
        reply.items.append(reasoning)
        reply.reasoning_text = text
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    last = items[-1] if items else {}
    search = _SEARCH.search(user)
    call = _CALL_TOOL.search(user)
    if last.get("type") == "function_call_output":
        outputs = []
        for item in reversed(items):
            if item.get("type") != "function_call_output":
                break
            output = item.get("output")
            outputs.append(output if isinstance(output, str) else text_of(output))
        text = f"Tool results: {' | '.join(reversed(outputs))[:ECHO_LIMIT]}"
        reply.items.append(_message(n, f"{text} (reasoning items carried: {carried})"))
    elif call and any(t.get("type") == "function" for t in tools):
        reply.items.append(
            {
                "id": f"fc_fake{n}",
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_{next_call_id()}",
                "name": call.group(1),
                "arguments": call.group(2).strip() or "{}",
            }
        )
    elif search and any(t.get("type") in _HOSTED_SEARCH for t in tools):
        query = search.group(1).strip()
        reply.items.append(
            {
                "id": f"ws_fake{n}",
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": query},
            }
        )
        url = "https://example.com/" + query.replace(" ", "-")
        text = f"Found: {query}"
        citation = {
            "type": "url_citation",
            "start_index": 0,
            "end_index": len(text),
            "url": url,
            "title": query,
        }
        reply.items.append(_message(n, text, [citation]))
    else:
        reply.items.append(_message(n, f"Echo: {user[:ECHO_LIMIT]}"))
    return reply


def usage(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    prompt = len(orjson.dumps(body.get("input") or "")) // 4 + 4
    reasoning = len(reply.reasoning_text or "") // 4
    output = len(orjson.dumps(reply.items)) // 8 + 1 + reasoning
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + output,
    }


def response(
    body: dict[str, Any], reply: Reply, n: int, status: str = "completed"
) -> dict[str, Any]:
    done = status == "completed"
    return {
        "id": f"resp_fake{n}",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model"),
        "output": reply.items if done else [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": usage(body, reply) if done else None,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


# ---- streaming --------------------------------------------------------------------------


def _sse(payload: dict[str, Any]) -> bytes:
    kind = str(payload["type"]).encode()
    return b"event: " + kind + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def _ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"response.{kind}", **fields}


def _item_events(item: dict[str, Any], index: int) -> list[dict[str, Any]]:
    kind = item["type"]
    at = {"item_id": item["id"], "output_index": index}
    added: dict[str, Any] = {**item, "status": "in_progress"}
    events: list[dict[str, Any]] = []
    if kind == "reasoning":
        added = {k: v for k, v in item.items() if k != "encrypted_content"} | {"summary": []}
        events.append(_ev("output_item.added", output_index=index, item=added))
        for s, part in enumerate(item.get("summary") or []):
            empty = {"type": "summary_text", "text": ""}
            events.append(_ev("reasoning_summary_part.added", **at, summary_index=s, part=empty))
            for word in split_words(part["text"]):
                events.append(
                    _ev("reasoning_summary_text.delta", **at, summary_index=s, delta=word)
                )
            text = part["text"]
            events.append(_ev("reasoning_summary_text.done", **at, summary_index=s, text=text))
            events.append(_ev("reasoning_summary_part.done", **at, summary_index=s, part=part))
    elif kind == "message":
        part = item["content"][0]
        events.append(_ev("output_item.added", output_index=index, item=added | {"content": []}))
        empty = {"type": "output_text", "text": "", "annotations": []}
        events.append(_ev("content_part.added", **at, content_index=0, part=empty))
        for word in split_words(part["text"]):
            events.append(_ev("output_text.delta", **at, content_index=0, delta=word, logprobs=[]))
        text = part["text"]
        events.append(_ev("output_text.done", **at, content_index=0, text=text, logprobs=[]))
        events.append(_ev("content_part.done", **at, content_index=0, part=part))
    elif kind == "function_call":
        events.append(_ev("output_item.added", output_index=index, item=added | {"arguments": ""}))
        arguments = item["arguments"]
        for i in range(0, len(arguments), 8):
            events.append(_ev("function_call_arguments.delta", **at, delta=arguments[i : i + 8]))
        events.append(_ev("function_call_arguments.done", **at, arguments=arguments))
    else:  # web_search_call
        events.append(_ev("output_item.added", output_index=index, item=added))
        for phase in ("in_progress", "searching", "completed"):
            events.append(_ev(f"web_search_call.{phase}", **at))
    events.append(_ev("output_item.done", output_index=index, item=item))
    return events


def stream_events(body: dict[str, Any], reply: Reply, n: int) -> list[bytes]:
    """OpenAI's typed events for the reply, each with its sequence_number (no [DONE])."""
    opened = response(body, reply, n, status="in_progress")
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": opened},
        {"type": "response.in_progress", "response": opened},
    ]
    for index, item in enumerate(reply.items):
        events += _item_events(item, index)
    events.append({"type": "response.completed", "response": response(body, reply, n)})
    return [_sse({**event, "sequence_number": i}) for i, event in enumerate(events)]
