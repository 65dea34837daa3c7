"""The fake upstream's Anthropic-shaped ``POST /v1/messages`` (pure builders and checks).

Like Anthropic it answers with content blocks (thinking first, then text or tool_use), a
``stop_reason`` and Anthropic's usage, as JSON or as Anthropic's SSE events; and like Anthropic
it refuses (400 invalid_request_error) what a proxy could get wrong:

- a ``thinking`` block sent back whose ``signature`` is not the one issued for its text (an
  HMAC of the text), a ``redacted_thinking`` block whose data it did not issue;
- with ``thinking`` enabled, a tool loop whose last assistant message does not start with a
  thinking block (the thinking was dropped on the way back);
- a ``tool_result`` whose ``tool_use_id`` has no ``tool_use`` in the immediately previous
  assistant message, a ``tool_use`` without its ``tool_result`` in the next user message;
- more than 4 ``cache_control`` breakpoints; ``max_tokens`` missing;
- ``context_management`` without the beta that enables it in ``anthropic-beta``
  (``context-management-2025-06-27``, or ``compact-2026-01-12`` for ``compact_20260112``).

Answers: a scripted one, else ``CALL_TOOL:<name>:<json>`` in the last user text (with tools),
else "Tool results: …" after tool results, else "Echo: …". With ``thinking`` enabled the answer
starts with a signed thinking block ("Thinking about: …"); ``REDACTED_THINKING`` in the user
text adds a redacted one. The prompt cache (``usage``): each breakpoint's prefix is a cache
entry, read back when a later prompt has it at or up to 20 blocks before one of its breakpoints;
the rest up to the last breakpoint is written, split by ``ttl`` (``cache_creation``); a 1-hour
breakpoint after a 5-minute one is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from .responses import _COUNTER, ECHO_LIMIT, TOKEN_SCALE, split_words

SECRET = b"fake-anthropic-signing-key"
_CALL_TOOL = re.compile(r"CALL_TOOL:([A-Za-z0-9_.\-]+):([^\r\n]*)")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def sign(thinking: str) -> str:
    return hmac.new(SECRET, thinking.encode(), hashlib.sha256).hexdigest()


def redacted_data(seed: str) -> str:
    return "redacted:" + sign("redacted:" + seed)


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message or f"Fake {status}."}}


class Invalid(Exception):
    """A request Anthropic would refuse with 400."""


# ---- reading a request ------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def text_of(content: Any) -> str:
    return " ".join(
        str(block.get("text", "")) for block in _blocks(content) if block.get("type") == "text"
    )


def _has_text(message: dict[str, Any]) -> bool:
    return any(block.get("type") == "text" for block in _blocks(message.get("content")))


def _count_breakpoints(body: dict[str, Any]) -> int:
    count = sum(1 for tool in body.get("tools") or [] if tool.get("cache_control"))
    system = body.get("system")
    if isinstance(system, list):
        count += sum(
            1 for block in system if isinstance(block, dict) and block.get("cache_control")
        )
    for message in body.get("messages") or []:
        for block in _blocks(message.get("content")):
            count += 1 if block.get("cache_control") else 0
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                count += sum(1 for part in block["content"] if part.get("cache_control"))
    return count


def _check_thinking(messages: list[dict[str, Any]], thinking_on: bool) -> None:
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        for j, block in enumerate(_blocks(message.get("content"))):
            where = f"messages.{i}.content.{j}"
            if block.get("type") == "thinking":
                if not hmac.compare_digest(
                    str(block.get("signature")), sign(block.get("thinking", ""))
                ):
                    raise Invalid(f"{where}: Invalid `signature` in `thinking` block")
            elif block.get("type") == "redacted_thinking":
                data = str(block.get("data", ""))
                if not data.startswith("redacted:"):
                    raise Invalid(f"{where}: Invalid `data` in `redacted_thinking` block")
    if not thinking_on:
        return
    # The current tool loop: assistant messages after the last user message with text.
    start = max(
        (i for i, m in enumerate(messages) if m.get("role") == "user" and _has_text(m)), default=0
    )
    for i in range(start, len(messages)):
        message = messages[i]
        blocks = _blocks(message.get("content"))
        if message.get("role") != "assistant" or not any(
            b.get("type") == "tool_use" for b in blocks
        ):
            continue
        if blocks[0].get("type") not in ("thinking", "redacted_thinking"):
            raise Invalid(
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                f"found `{blocks[0].get('type')}`. When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block."
            )


def _check_tool_pairs(messages: list[dict[str, Any]]) -> None:
    """Anthropic's pairing rule: each ``tool_use`` answered in the very next (user) message,
    each ``tool_result`` answering a ``tool_use`` of the very previous (assistant) message."""
    for i, message in enumerate(messages):
        blocks = _blocks(message.get("content"))
        previous = messages[i - 1] if i > 0 else {}
        if message.get("role") == "user":
            issued = {
                str(b.get("id"))
                for b in _blocks(previous.get("content"))
                if previous.get("role") == "assistant" and b.get("type") == "tool_use"
            }
            for j, block in enumerate(blocks):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in issued:
                    raise Invalid(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous message."
                    )
        elif message.get("role") == "assistant" and i + 1 < len(messages):
            following = messages[i + 1]
            answered = {
                str(b.get("tool_use_id"))
                for b in _blocks(following.get("content"))
                if following.get("role") == "user" and b.get("type") == "tool_result"
            }
            missing = [
                str(b.get("id"))
                for b in blocks
                if b.get("type") == "tool_use" and str(b.get("id")) not in answered
            ]
            if missing:
                raise Invalid(
                    f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )


def _check_ttls(parts: list[Any]) -> None:
    """Anthropic refuses an unknown ``ttl`` and a 1-hour breakpoint after a 5-minute one."""
    seen_5m = False
    for part in parts:
        control = part.get("cache_control") if isinstance(part, dict) else None
        if not isinstance(control, dict):
            continue
        ttl = control.get("ttl", "5m")
        if ttl not in ("5m", "1h"):
            raise Invalid(f"cache_control.ttl: Input should be '5m' or '1h' (got {ttl!r})")
        if ttl == "1h" and seen_5m:
            raise Invalid(
                "a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following "
                "order: `tools`, `system`, `messages`."
            )
        seen_5m = seen_5m or ttl == "5m"


_EDIT_BETAS = {"compact_20260112": "compact-2026-01-12"}
_CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"


def _check_context_management(body: dict[str, Any], betas: str) -> None:
    management = body.get("context_management")
    if management is None:
        return
    enabled = {beta.strip() for beta in betas.split(",")}
    edits = management.get("edits") if isinstance(management, dict) else None
    for edit in edits if isinstance(edits, list) else [{}]:
        kind = edit.get("type") if isinstance(edit, dict) else None
        if _EDIT_BETAS.get(str(kind), _CONTEXT_MANAGEMENT_BETA) not in enabled:
            raise Invalid("context_management: Extra inputs are not permitted")


def check(body: dict[str, Any], betas: str = "") -> None:
    """Refuse what Anthropic refuses; ``betas``: the request's ``anthropic-beta`` header."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("model: Field required")
    if not isinstance(body.get("max_tokens"), int):
        raise Invalid("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: Field required")
    breakpoints = _count_breakpoints(body)
    if breakpoints > 4:
        raise Invalid(
            f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        )
    _check_ttls(_prefix_until_last_breakpoint(body))
    _check_tool_pairs(messages)
    _check_context_management(body, betas)
    thinking = body.get("thinking") or {}
    _check_thinking(messages, thinking.get("type") == "enabled")


# ---- answering --------------------------------------------------------------------------


@dataclass
class Reply:
    blocks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(b["type"] == "tool_use" for b in self.blocks) else "end_turn"


def plan(body: dict[str, Any], scripted: dict[str, Any] | None, next_id: Any) -> Reply:
    messages = body["messages"]
    last = messages[-1]
    user_text = text_of(last.get("content")) if last.get("role") == "user" else ""
    reply = Reply()
    if (body.get("thinking") or {}).get("type") == "enabled":
        thought = f"Thinking about: {user_text[:50]}"
        reply.blocks.append({"type": "thinking", "thinking": thought, "signature": sign(thought)})
        if "REDACTED_THINKING" in user_text:
            reply.blocks.append({"type": "redacted_thinking", "data": redacted_data(thought)})
    if scripted is not None:
        if scripted.get("content"):
            reply.blocks.append({"type": "text", "text": scripted["content"]})
        for call in scripted.get("tool_calls") or []:
            arguments = call.get("arguments") or "{}"
            data = orjson.loads(arguments) if isinstance(arguments, str) else arguments
            reply.blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{next_id()}",
                    "name": call["name"],
                    "input": data,
                }
            )
        return reply
    match = _CALL_TOOL.search(user_text) if body.get("tools") else None
    if match is None and body.get("tools") and last.get("role") == "user":
        # An agent's tool loop: the last tool result may ask for the next call.
        results = [b for b in _blocks(last.get("content")) if b.get("type") == "tool_result"]
        if results:
            match = _CALL_TOOL.search(text_of(results[-1].get("content")))
    if match:
        try:
            data = orjson.loads(match.group(2).strip() or "{}")
        except orjson.JSONDecodeError:
            data = {"raw": match.group(2).strip()}
        reply.blocks.append(
            {"type": "tool_use", "id": f"toolu_{next_id()}", "name": match.group(1), "input": data}
        )
        return reply
    results = (
        [b for b in _blocks(last.get("content")) if b.get("type") == "tool_result"]
        if last.get("role") == "user"
        else []
    )
    if results:
        texts = [
            b["content"] if isinstance(b.get("content"), str) else text_of(b.get("content"))
            for b in results
        ]
        reply.blocks.append(
            {"type": "text", "text": f"Tool results: {' | '.join(texts)[:ECHO_LIMIT]}"}
        )
    else:
        reply.blocks.append({"type": "text", "text": f"Echo: {user_text[:ECHO_LIMIT]}"})
    return reply


def _tokens(value: Any) -> int:
    return len(orjson.dumps(value)) // 4 + 1


def _part_text(part: Any) -> str:
    """What the provider's tokenizer reads of one part of the prompt."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "thinking":
        return str(part.get("thinking", ""))
    if kind == "tool_use":
        return f"{part.get('name', '')} {orjson.dumps(part.get('input')).decode()}"
    if kind == "tool_result":
        inner = part.get("content")
        return inner if isinstance(inner, str) else " ".join(map(_part_text, _blocks(inner)))
    if kind in ("redacted_thinking", "image", "document"):
        return "x" * 64
    return orjson.dumps(part).decode()  # a tool definition


def _prompt_tokens(parts: list[Any], messages: int, scale: float = TOKEN_SCALE) -> int:
    """The provider's count of ``parts``: tiktoken's, as contextgate counts, so that the ratio
    is ``TOKEN_SCALE`` (Claude's tokenizer runs 20-35% above tiktoken)."""
    own = sum(_COUNTER.count_cached(_part_text(p), "gpt-4o") for p in parts) + 4 * messages
    return round(own * scale)


def prompt_tokens(body: dict[str, Any], scale: float | None = None) -> int:
    """The whole prompt's tokens as this upstream bills them (``scale``: another process's
    ``TOKEN_SCALE``, e.g. a test's ``FakeUpstream(token_scale=)``)."""
    return _prompt_tokens(_parts(body), len(body.get("messages") or []), scale or TOKEN_SCALE)


def _parts(body: dict[str, Any]) -> list[Any]:
    """The request's parts in prompt order: tools, system blocks, message blocks."""
    parts: list[Any] = [*(body.get("tools") or [])]
    system = body.get("system")
    parts += system if isinstance(system, list) else ([system] if system else [])
    for message in body.get("messages") or []:
        parts += _blocks(message.get("content"))
    return parts


def _marked(part: Any) -> bool:
    return isinstance(part, dict) and bool(part.get("cache_control"))


def _prefix_until_last_breakpoint(body: dict[str, Any]) -> list[Any]:
    """The request's parts in prompt order, up to the last one with cache_control."""
    parts = _parts(body)
    last = max((i for i, p in enumerate(parts) if _marked(p)), default=-1)
    return parts[: last + 1]


def _one_hour(part: Any) -> bool:
    return isinstance(part, dict) and (part.get("cache_control") or {}).get("ttl") == "1h"


def _prefix_keys(parts: list[Any]) -> list[str]:
    """The cache key of every prefix (``[i]``: parts 0..i), chained so that each part is
    hashed once: the content, its cache_control marks aside (moving a breakpoint does not
    change what is cached)."""
    keys: list[str] = []
    previous = b""
    for part in parts:
        bare = (
            {k: v for k, v in part.items() if k != "cache_control"}
            if isinstance(part, dict)
            else part
        )
        digest = hashlib.sha256(previous + orjson.dumps(bare, option=orjson.OPT_SORT_KEYS))
        previous = digest.digest()
        keys.append(digest.hexdigest())
    return keys


LOOKBACK = 20  # Anthropic looks for a cached prefix up to 20 blocks before each breakpoint


def usage(body: dict[str, Any], reply: Reply, seen_prefixes: set[str]) -> dict[str, Any]:
    """Anthropic's usage. Each breakpoint's prefix is a cache entry; the longest entry found at
    a breakpoint (or up to 20 blocks before one) is read, the rest up to the last breakpoint
    is written, split by lifetime: up to the last ``ttl: "1h"`` breakpoint for an hour, the
    rest for 5 minutes. (No minimum cacheable length, unlike Anthropic.) Tokens are counted as
    ``prompt_tokens`` counts them: contextgate's tokenizer times the token scale."""
    total = prompt_tokens(body)
    parts = _parts(body)
    marks = [i for i, p in enumerate(parts) if _marked(p)]
    read = write = write_1h = 0
    if marks:
        keys = _prefix_keys(parts[: marks[-1] + 1])
        hits = [
            j
            for b in marks
            for j in range(max(0, b - LOOKBACK + 1), b + 1)
            if keys[j] in seen_prefixes
        ]
        read = min(_prompt_tokens(parts[: max(hits) + 1], 0), total) if hits else 0
        cached = min(_prompt_tokens(parts[: marks[-1] + 1], 0), total)
        write = max(cached - read, 0)
        last_1h = max((i for i in marks if _one_hour(parts[i])), default=-1)
        if write and last_1h >= 0:
            write_1h = min(max(_prompt_tokens(parts[: last_1h + 1], 0) - read, 0), write)
        seen_prefixes.update(keys[b] for b in marks)
    return {
        "input_tokens": total - read - write,
        "output_tokens": _tokens(reply.blocks),
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": write - write_1h,
            "ephemeral_1h_input_tokens": write_1h,
        },
    }


def message(body: dict[str, Any], reply: Reply, n: int, used: dict[str, int]) -> dict[str, Any]:
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": reply.blocks,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": used,
    }


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def _block_events(index: int, block: dict[str, Any]) -> list[bytes]:
    kind = block["type"]
    start: dict[str, Any]
    deltas: list[dict[str, Any]] = []
    if kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas += [
            {"type": "thinking_delta", "thinking": w} for w in split_words(block["thinking"])
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        start = {"type": "text", "text": ""}
        deltas += [{"type": "text_delta", "text": w} for w in split_words(block["text"])]
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        args = orjson.dumps(block["input"]).decode()
        deltas += [
            {"type": "input_json_delta", "partial_json": args[i : i + 8]}
            for i in range(0, len(args), 8)
        ]
    else:  # redacted_thinking arrives whole
        start = block
    events = [
        _event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    events += [
        _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def stream_events(body: dict[str, Any], reply: Reply, n: int, used: dict[str, int]) -> list[bytes]:
    head = message(body, Reply(), n, {**used, "output_tokens": 1})
    head["stop_reason"] = None
    events = [
        _event("message_start", {"type": "message_start", "message": head}),
        _event("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(reply.blocks):
        events += _block_events(index, block)
    events.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": used["output_tokens"]},
            },
        )
    )
    events.append(_event("message_stop", {"type": "message_stop"}))
    return events
