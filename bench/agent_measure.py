"""What an agent's prompts cost, read from the bodies the fake upstream received (issue 27).

One ``Call`` per upstream request, in either wire form (chat completions or Anthropic's
Messages). A prompt is a list of units: the system prompt with the tool definitions, then each
message; ``cache_control`` marks are stripped before comparing (they are not content). From the
sequence of calls of one run:

- cache-weighted cost: the longest run of leading units equal to the previous prompt's is a
  cache read at 0.1x, the rest a cache write at 1.25x (Anthropic's prices, a breakpoint at the
  end of every prompt), in the provider's tokens (tiktoken's x the fake's token scale);
- prefix kept: the share of calls (after the first) whose prompt starts with the whole previous
  prompt (marks aside, and a content of one text block read as its string);
- thinking: calls that carried ``thinking`` among those whose client asked for it;
- over budget: prompts whose provider count passes the budget;
- broken pairs: a tool call without its result right after, or a result without its call;
- refusals: bodies the validating fake refuses (tests/fake_upstream/anthropic.py ``check``) plus
  errors the client got back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.tokens.counter import TokenCounter
from tests.fake_upstream import anthropic as fake_anthropic

__all__ = ["Call", "Figures", "measure", "strip_marks"]

READ, WRITE = 0.1, 1.25
COUNT_MODEL = "gpt-4o"
counter = TokenCounter()


def strip_marks(value: Any) -> Any:
    """``value`` without ``cache_control`` anywhere (marks are not content)."""
    if isinstance(value, dict):
        return {k: strip_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_marks(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """``value`` with every ``content`` that is one text block written as its string: the two
    forms are the same prompt to both APIs (and their caches), and a mark moved off a message
    turns the one into the other."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    plain = {k: _plain(v) for k, v in value.items()}
    content = plain.get("content")
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and set(content[0]) == {"type", "text"}
        and content[0]["type"] == "text"
    ):
        plain["content"] = content[0]["text"]
    return plain


def _tokens(text: str) -> int:
    return counter.count_cached(text, COUNT_MODEL)


@dataclass
class Call:
    """One upstream request of a run, as the fake upstream received it."""

    wire: str  # "anthropic" | "chat" | "responses" (what an agent sent to /v1/responses)
    body: dict[str, Any]
    asked_thinking: bool = False  # the client asked for extended thinking on this call
    betas: str = ""  # the request's anthropic-beta header

    def units(self) -> list[bytes]:
        body = _plain(strip_marks(self.body))
        if self.wire == "responses":
            head = {"instructions": body.get("instructions"), "tools": body.get("tools")}
            items = body.get("input") or []
            return [orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in [head, *items]]
        head = {"system": body.get("system"), "tools": body.get("tools")}
        messages: list[Any] = body.get("messages") or []
        if self.wire == "chat" and messages and messages[0].get("role") == "system":
            head["system"], messages = messages[0], messages[1:]
        return [orjson.dumps(head, option=orjson.OPT_SORT_KEYS)] + [
            orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages
        ]

    def unit_tokens(self) -> list[int]:
        """Each unit's tokens as the provider counts them, before the token scale."""
        body = self.body
        messages = body.get("messages") or []
        if self.wire == "responses":
            head = _tokens(str(body.get("instructions") or ""))
            head += _tokens(orjson.dumps(body["tools"]).decode()) if body.get("tools") else 0
            return [head] + [4 + _tokens(_item_text(x)) for x in body.get("input") or []]
        if self.wire == "chat":
            leading = [m for m in messages[:1] if m.get("role") == "system"]
            rest = messages[len(leading) :]
            head = sum(counter.count_message(m, COUNT_MODEL) for m in leading)
            head += _tokens(orjson.dumps(body["tools"]).decode()) if body.get("tools") else 0
            return [head] + [counter.count_message(m, COUNT_MODEL) for m in rest]
        system = body.get("system")
        parts: list[Any] = [*(body.get("tools") or [])]
        parts += system if isinstance(system, list) else ([system] if system else [])
        head = sum(_tokens(fake_anthropic._part_text(p)) for p in parts)
        return [head] + [
            4 + sum(_tokens(fake_anthropic._part_text(b)) for b in _blocks(m.get("content")))
            for m in messages
        ]

    @property
    def thinking_sent(self) -> bool:
        return (self.body.get("thinking") or {}).get("type") == "enabled"

    def refusal(self) -> str | None:
        if self.wire != "anthropic":
            return None
        try:
            fake_anthropic.check(self.body, self.betas)
        except fake_anthropic.Invalid as refused:
            return str(refused)
        return None

    def broken_pairs(self) -> int:
        if self.wire == "responses":
            return 0  # Codex's own requests: the reference, not what is measured
        if self.wire == "chat":
            return _broken_chat_pairs(self.body.get("messages") or [])
        return _broken_anthropic_pairs(self.body.get("messages") or [])


def _item_text(item: Any) -> str:
    """What a tokenizer reads of one Responses input item."""
    if not isinstance(item, dict):
        return str(item)
    if item.get("type") == "function_call":
        return f"{item.get('name', '')} {item.get('arguments', '')}"
    if item.get("type") == "function_call_output":
        output = item.get("output")
        return output if isinstance(output, str) else orjson.dumps(output).decode()
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return orjson.dumps(item).decode()


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _broken_chat_pairs(prompt: Sequence[dict[str, Any]]) -> int:
    broken, open_calls = 0, set()
    for message in prompt:
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_calls:
                broken += 1
            open_calls.discard(message.get("tool_call_id"))
            continue
        broken += len(open_calls)  # calls whose results never came
        open_calls = {str(c.get("id")) for c in message.get("tool_calls") or []}
    return broken + len(open_calls)


def _broken_anthropic_pairs(prompt: Sequence[dict[str, Any]]) -> int:
    broken, issued = 0, set[str]()
    for i, message in enumerate(prompt):
        blocks = [b for b in _blocks(message.get("content")) if isinstance(b, dict)]
        if message.get("role") == "user":
            answered = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
            broken += len(answered - issued) + len(issued - answered)
            issued = set()
        else:
            broken += len(issued)  # two assistant messages in a row: the calls went unanswered
            issued = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
            if i == len(prompt) - 1:
                issued = set()  # a prefill, not a call
    return broken + len(issued)


@dataclass
class Figures:
    calls: int
    cost: float
    costs: list[float]
    kept: float  # share of calls after the first that kept the previous prompt whole
    not_kept: list[int]  # the calls (1-based) that did not
    thinking_asked: int
    thinking_sent: int
    largest: int  # the largest prompt, provider tokens
    over: int
    broken: int
    refusals: list[str] = field(default_factory=list)

    def ratio(self, reference: Figures) -> float:
        return self.cost / reference.cost if reference.cost else float("nan")


def measure(calls: Sequence[Call], budget: int, scale: float, errors: int = 0) -> Figures:
    """The figures of one run; ``errors``: failed calls the client saw (counted as refusals
    when the fake's own check does not already explain them)."""
    costs: list[float] = []
    kept, not_kept, largest, over = 0, [], 0, 0
    previous: list[bytes] | None = None
    refusals = [r for r in (c.refusal() for c in calls) if r]
    for n, call in enumerate(calls, start=1):
        units, sizes = call.units(), [t * scale for t in call.unit_tokens()]
        total = sum(sizes)
        largest = max(largest, round(total))
        over += total > budget
        common = 0
        if previous is not None:
            for old, new in zip(previous, units, strict=False):
                if old != new:
                    break
                common += 1
            if common == len(previous):
                kept += 1
            else:
                not_kept.append(n)
        cached = sum(sizes[:common])
        costs.append(READ * cached + WRITE * (total - cached))
        previous = units
    refusals += ["the client got an error"] * max(0, errors - len(refusals))
    return Figures(
        calls=len(calls),
        cost=sum(costs),
        costs=costs,
        kept=kept / max(1, len(calls) - 1),
        not_kept=not_kept,
        thinking_asked=sum(c.asked_thinking for c in calls),
        thinking_sent=sum(c.asked_thinking and c.thinking_sent for c in calls),
        largest=largest,
        over=over,
        broken=sum(c.broken_pairs() for c in calls),
        refusals=refusals,
    )
