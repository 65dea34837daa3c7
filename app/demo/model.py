"""The built-in offline demo model: deterministic answers shaped like a real model's.

It answers the requests contextgate itself sends (the planner's JSON plan, artifact summaries,
compaction summaries, memory extraction) in their expected formats, so that a newcomer sees the
planner, the summaries, compaction and memory at work with no provider. For a user it echoes
what it was sent (how many messages, the last question, names it was told), calls a tool when
asked to, and reports token usage counted with tiktoken as a real model would.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
from collections.abc import Sequence
from typing import TypedDict

import orjson

from app.tokens.counter import TokenCounter, text_of
from app.wire.chat import ChatMessage, ChatTool, ChatUsage, ToolCall

__all__ = ["DEMO_CREATED", "DEMO_MODELS", "DemoRequest", "answer", "embed", "usage"]

DEMO_CREATED = 1_767_225_600  # fixed: answers are byte-for-byte reproducible
DEMO_MODELS = ("demo", "demo-planner", "demo-summarizer")
_COUNTER = TokenCounter()
_ARTIFACT = re.compile(r'<artifact_preview id="([^"]+)">\n(.*?)\n</artifact_preview>', re.S)
_SOURCE = re.compile(r"<source[^>]*>\n?(.*?)\n?</source>", re.S)
_NAME = re.compile(r"\bmy name is ([A-Z][\w-]*)", re.I)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_TOOL_ASK = re.compile(r"\b(use|call|run|check|look up|weather)\b", re.I)


class StreamOptions(TypedDict, total=False):
    include_usage: bool


class DemoRequest(TypedDict, total=False):
    """A chat request as an upstream gets it: the keys the demo reads (JSON as sent, so each
    is checked where it is read)."""

    model: str
    messages: list[ChatMessage]
    tools: list[ChatTool]
    stream: bool
    stream_options: StreamOptions


def _system(messages: Sequence[ChatMessage]) -> str:
    if not messages or messages[0].get("role") != "system":
        return ""
    return text_of(messages[0].get("content"))


def _last(messages: Sequence[ChatMessage], role: str) -> ChatMessage | None:
    return next((m for m in reversed(messages) if m.get("role") == role), None)


def _sentences(text: str, limit: int) -> str:
    picked = [s.strip() for s in _SENTENCE.findall(text) if len(s.strip()) > 3][:limit]
    # a short text ("18C") has no sentence worth the name: quote it whole
    return (" ".join(picked) or text.strip())[:600]


def _plan(messages: Sequence[ChatMessage]) -> str:
    """An ArtifactPlan: summarize long artifacts, include short ones in full."""
    decisions = []
    for priority, (artifact_id, preview) in enumerate(
        _ARTIFACT.findall(text_of(messages[-1].get("content"))), start=1
    ):
        long = "chars omitted" in preview or len(preview) > 800
        decisions.append(
            {
                "artifact_id": artifact_id,
                "strategy": "summarize" if long else "include_full",
                "priority": priority,
                "relevance_rationale": "long: a summary keeps what matters"
                if long
                else "short and relevant",
                "summarization_focus": "the user's question" if long else None,
                "extraction_query": None,
            }
        )
    reasoning = f"demo planner: {len(decisions)} artifact(s); long ones summarized"
    return orjson.dumps({"artifacts": decisions, "reasoning": reasoning}).decode()


def _user_text(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(text_of(m.get("content")) for m in messages if m.get("role") != "system")


def _compaction(messages: Sequence[ChatMessage]) -> str:
    text = _user_text(messages)
    facts = [
        {"fact": f"The user's name is {name}.", "type": "fact", "importance": 8, "confidence": 1}
        for name in dict.fromkeys(_NAME.findall(text))
    ]
    episodic = f"Demo summary of earlier turns: {_sentences(text, 4)}"
    return orjson.dumps({"episodic": episodic, "facts": facts}).decode()


def _extraction(messages: Sequence[ChatMessage]) -> str:
    text = _user_text(messages)
    memories = [
        {"content": f"The user's name is {name}.", "memory_type": "fact", "importance": 8}
        for name in dict.fromkeys(_NAME.findall(text))
    ]
    return orjson.dumps({"memories": memories}).decode()


def _summary(messages: Sequence[ChatMessage]) -> str:
    text = _user_text(messages)
    found = _SOURCE.search(text)
    return f"Summary (demo): {_sentences(found.group(1) if found else text, 3)}"


def _tool_call(tools: list[ChatTool], asked: str) -> ToolCall | None:
    """A call of the tool the user names (else the first one) when the user asks for one."""
    if not tools or not _TOOL_ASK.search(asked):
        return None
    functions = [t.get("function") or {} for t in tools if isinstance(t, dict)]
    chosen = next((f for f in functions if f.get("name") and f["name"] in asked), functions[0])
    properties = (chosen.get("parameters") or {}).get("properties") or {}
    words = re.findall(r"[A-Z][a-z]+", asked) or ["demo"]
    arguments = {
        name: (words[-1] if (spec or {}).get("type", "string") == "string" else 1)
        for name, spec in properties.items()
    }
    digest = hashlib.sha256(asked.encode()).hexdigest()[:12]
    return {
        "id": f"call_demo_{digest}",
        "type": "function",
        "function": {
            "name": str(chosen.get("name") or "tool"),
            "arguments": orjson.dumps(arguments).decode(),
        },
    }


def _chat_answer(messages: Sequence[ChatMessage], model: str) -> str:
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "tool":
        return f"Demo answer from the tool result: {_sentences(text_of(last.get('content')), 2)}"
    user = _last(messages, "user")
    question = text_of(user.get("content") if user else None).strip()
    seen = _user_text(messages)
    names = _NAME.findall(seen)
    parts = [f'Demo answer (offline model): you asked "{question[:200]}".']
    parts.append(f"I was sent {len(messages)} message(s), about {count(messages, model)} tokens.")
    if names and "name" in question.lower() and not _NAME.search(question):
        parts.append(f"Your name is {names[-1]}.")
    return " ".join(parts)


def _model(body: DemoRequest) -> str:
    return str(body.get("model") or "demo")


def count(messages: Sequence[ChatMessage], model: str) -> int:
    """Counted with the tokenizer contextgate uses for the requested name: the same numbers as
    its own report, and no second tokenizer in memory (each is 45-70 MB)."""
    return _COUNTER.count_messages(messages, model)


def _messages(body: DemoRequest) -> list[ChatMessage]:
    """The request's messages (JSON as sent: the objects among them)."""
    return [m for m in body.get("messages") or [] if isinstance(m, dict)]


def answer(body: DemoRequest) -> tuple[str | None, list[ToolCall]]:
    """(content, tool_calls) for one chat request, by what the request is."""
    messages = _messages(body)
    system = _system(messages)
    if system.startswith("You plan the context"):
        return _plan(messages), []
    if system.startswith(("You compact the older part", "You merge consecutive summaries")):
        return _compaction(messages), []
    if system.startswith("You maintain the long-term memory"):
        return _extraction(messages), []
    if system.startswith("You summarize a document"):
        return _summary(messages), []
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user":
        call = _tool_call(body.get("tools") or [], text_of(last.get("content")))
        if call is not None:
            return None, [call]
    return _chat_answer(messages, _model(body)), []


def usage(body: DemoRequest, content: str | None, tool_calls: list[ToolCall]) -> ChatUsage:
    model = _model(body)
    prompt = count(_messages(body), model)
    completion = _COUNTER.count_text(content or "", model)
    if tool_calls:
        completion += _COUNTER.count_text(orjson.dumps(tool_calls).decode(), model)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def embed(text: str, dimensions: int = 64) -> list[float]:
    """A deterministic unit vector from the text's words (similar texts, similar vectors)."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        index = struct.unpack_from(">I", digest)[0] % dimensions
        vector[index] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]
