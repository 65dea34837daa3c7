"""``llm_triggered`` memory extraction (seed 003): the model saves memories itself.

When a request's extraction mode is ``llm_triggered`` (and it names a ``user``), contextgate
adds a ``remember`` tool to the upstream call. The model's calls to it are handled here: the
memory is stored, the call and its result are appended, and the upstream call continues (at
most ``CONTEXTGATE_REMEMBER_MAX_ROUNDS`` rounds; calls in the last one are stored and the answer
ends there). The tool stays offered in every round (history with its calls needs it). The
client never sees the tool, its calls or their results; the usage and cost it gets cover every
round. Calls to the client's own tools pass through with their indexes renumbered.

Two wrappers around the upstream call, one per shape: ``llm_call_with_remember`` (a
completion) and ``llm_stream_with_remember`` (a stream handle).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import orjson
from pydantic import BaseModel, Field, ValidationError

from app.core.settings import Settings
from app.llm.client import Completion, LLMClient, StreamHandle
from app.llm.pricing import add_usage
from app.llm.responses import Usage
from app.memories.index_refresh import IndexServices, refresh_soon
from app.memories.schemas import MEMORY_TYPES, MemoryType
from app.memories.service import NewMemory, memory_service
from app.wire.chat import AssistantContent, ChatMessage, ChatTool, ChatUsage, ToolCall
from app.wire.json import JSONObject
from app.wire.stream import ChatChunk, ChunkChoice, Delta, ToolCallDelta

if TYPE_CHECKING:
    from app.turns.prepared import Prepared

__all__ = [
    "REMEMBER_TOOL",
    "UpstreamServices",
    "llm_call_with_remember",
    "llm_stream_with_remember",
    "remember_active",
]

logger = logging.getLogger(__name__)
TOOL_NAME = "remember"

REMEMBER_TOOL: ChatTool = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Save something about the user worth knowing in future conversations: a stable "
            "fact, preference, decision or lesson. Call it only for lasting information; the "
            "user does not see this call."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "one self-contained statement"},
                "memory_type": {"type": "string", "enum": list(MEMORY_TYPES)},
                "importance": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["content"],
        },
    },
}


@dataclass(frozen=True, slots=True)
class UpstreamServices:
    """What the turn's upstream call uses: the model client, the settings, and where a
    ``remember`` call's memory goes (the users' memory indexes; their database is the one the
    memory is written to). Built from the state by ``memory_services.upstream_services``."""

    llm: LLMClient
    settings: Settings
    memories: IndexServices


class _RememberArgs(BaseModel):
    content: str = Field(min_length=1, max_length=2000)
    memory_type: MemoryType = "fact"
    importance: int = Field(5, ge=1, le=10)


def remember_active(settings: Settings, prepared: Prepared) -> bool:
    request = prepared.request
    mode = request.context.memory_extraction or settings.memory_extraction_mode
    if mode != "llm_triggered" or not request.user or not request.context.memory:
        return False
    if not request.context.enabled:
        return False
    names = {((t.get("function") or {}).get("name")) for t in request.tools or []}
    return TOOL_NAME not in names  # the client's own "remember" tool wins


def _params(prepared: Prepared, *, with_tool: bool) -> JSONObject:
    """The request's params as forwarded upstream, with the remember tool when asked."""
    params = prepared.request.forwarded_params()
    if with_tool:
        params["tools"] = [*(params.get("tools") or []), REMEMBER_TOOL]
    return params


def _is_mine(call: ToolCall | ToolCallDelta) -> bool:
    return (call.get("function") or {}).get("name") == TOOL_NAME


async def _store(
    services: UpstreamServices, prepared: Prepared, calls: list[ToolCall]
) -> list[str]:
    """Store what the calls ask to remember; one tool-result text per call."""
    request = prepared.request
    assert request.user is not None
    results: list[str] = []
    stored: list[str] = []
    memories = services.memories
    async with memories.database.writing() as session:
        for call in calls:
            raw = (call.get("function") or {}).get("arguments") or "{}"
            try:
                args = _RememberArgs.model_validate(orjson.loads(raw))
            except (orjson.JSONDecodeError, ValidationError) as exc:
                results.append(f"Not stored: invalid arguments ({str(exc).splitlines()[0][:120]})")
                continue
            memory, _ = await memory_service.add(
                session,
                prepared.caller.tenant_id,
                request.user,
                NewMemory(
                    content=args.content,
                    memory_type=args.memory_type,
                    importance=args.importance,
                    confidence=0.9,
                    source="llm_triggered",
                    conversation_id=prepared.conversation_id,
                ),
                dedupe_threshold=services.settings.memory_dedupe_similarity,
            )
            stored.append(memory.id)
            results.append(f"Remembered ({memory.id}).")
    if stored:
        refresh_soon(memories, prepared.caller.tenant_id, request.user)
    prepared.utilization.memories_remembered.extend(stored)
    return results


def _continuation(
    content: AssistantContent, calls: list[ToolCall], results: list[str]
) -> list[ChatMessage]:
    """The assistant's remember calls and their results, to send back upstream."""
    assistant: ChatMessage = {"role": "assistant", "content": content, "tool_calls": calls}
    tools: list[ChatMessage] = [
        {"role": "tool", "tool_call_id": call.get("id"), "content": result}
        for call, result in zip(calls, results, strict=True)
    ]
    return [assistant, *tools]


_EMPTY_ANSWER: ChatMessage = {"role": "assistant"}  # a choice without a message (copied)


def _text(message: ChatMessage) -> str:
    """What an answer said (a string; an answer has no parts)."""
    content = message.get("content")
    return content if isinstance(content, str) else ""


# ---- non-streaming ------------------------------------------------------------------------
async def llm_call_with_remember(services: UpstreamServices, prepared: Prepared) -> Completion:
    """The upstream completion for this turn, with the remember loop when it is active."""
    request, llm = prepared.request, services.llm
    if not remember_active(services.settings, prepared):
        return await llm.complete(
            request.model,
            prepared.messages,
            request.forwarded_params(),
            headers=prepared.upstream_headers,
        )
    rounds = services.settings.remember_max_rounds
    messages = list(prepared.messages)
    usage: dict[str, object] = {}  # the rounds' chat usage, summed key by key
    prompt_cost = completion_cost = cache_read_cost = cache_write_cost = 0.0
    said: list[str] = []
    completion: Completion | None = None
    params = _params(prepared, with_tool=True)
    for round_ in range(rounds + 1):
        completion = await llm.complete(
            request.model, messages, params, headers=prepared.upstream_headers
        )
        add_usage(usage, completion.response.get("usage"))  # the cache's counts summed too
        prompt_cost += completion.prompt_cost
        completion_cost += completion.completion_cost
        cache_read_cost += completion.cache_read_cost
        cache_write_cost += completion.cache_write_cost
        choices = completion.response.get("choices") or []
        if not choices:
            break
        message = choices[0].get("message") or _EMPTY_ANSWER.copy()
        calls = message.get("tool_calls") or []
        mine = [c for c in calls if _is_mine(c)]
        if not mine:
            break
        results = await _store(services, prepared, mine)
        others = [c for c in calls if not _is_mine(c)]
        if others:  # the client's own tools are called too: it gets those, and only those
            message["tool_calls"] = others
            break
        if round_ == rounds:  # out of rounds: stored, but the answer ends here
            message.pop("tool_calls", None)
            choices[0]["finish_reason"] = "stop"
            break
        said.append(_text(message))
        messages += _continuation(message.get("content"), mine, results)
    assert completion is not None
    response = completion.response
    choices = response.get("choices") or []
    if choices and any(said):
        message = choices[0].get("message") or _EMPTY_ANSWER.copy()
        message["content"] = "".join([*said, _text(message)]) or None
    counts = cast(ChatUsage, usage)  # the rounds' usage summed key by key
    if usage:
        response["usage"] = counts
    total = Usage(counts.get("prompt_tokens", 0), counts.get("completion_tokens", 0), usage)
    return Completion(
        response,
        total,
        completion.deployment,
        prompt_cost,
        completion_cost,
        cache_read_cost,
        cache_write_cost,
    )


# ---- streaming ----------------------------------------------------------------------------
async def llm_stream_with_remember(services: UpstreamServices, prepared: Prepared) -> StreamHandle:
    """The upstream stream for this turn, with the remember loop when it is active."""
    request, llm = prepared.request, services.llm
    if not remember_active(services.settings, prepared):
        params = request.forwarded_params()
        return await llm.stream(
            request.model, prepared.messages, params, headers=prepared.upstream_headers
        )
    first = await llm.stream(
        request.model,
        prepared.messages,
        _params(prepared, with_tool=True),
        headers=prepared.upstream_headers,
    )
    return RememberStream(services, prepared, first)


class _Round:
    """One upstream stream of the loop: which tool calls are ours, and what was said."""

    def __init__(self) -> None:
        self.mapping: dict[int, int | None] = {}  # upstream index -> client index (None: ours)
        self.calls: dict[int, ToolCall] = {}
        self.content: list[str] = []

    @property
    def theirs(self) -> bool:
        return any(index is not None for index in self.mapping.values())

    def mine(self) -> list[ToolCall]:
        return [self.calls[i] for i in sorted(self.calls) if self.mapping.get(i) is None]

    def route(self, deltas: list[ToolCallDelta]) -> list[ToolCallDelta]:
        """Record every tool-call delta; return the client's, renumbered from 0."""
        kept: list[ToolCallDelta] = []
        for call in deltas:
            index = int(call.get("index", 0))
            if index not in self.mapping:
                theirs = sum(1 for v in self.mapping.values() if v is not None)
                self.mapping[index] = None if _is_mine(call) else theirs
            empty: ToolCall = {
                "id": None,
                "type": "function",
                "function": {"name": "", "arguments": ""},
            }
            slot = self.calls.setdefault(index, empty)
            if call.get("id"):
                slot["id"] = call["id"]
            function = call.get("function") or {}
            slot["function"]["name"] += function.get("name") or ""
            slot["function"]["arguments"] += function.get("arguments") or ""
            client_index = self.mapping[index]
            if client_index is not None:
                kept.append({**call, "index": client_index})
        return kept


class RememberStream(StreamHandle):
    """Chunks of every round as one stream; remember calls and per-round usage held back."""

    def __init__(self, services: UpstreamServices, prepared: Prepared, first: StreamHandle) -> None:
        super().__init__(None, None, first.deployment)
        self.services = services
        self.prepared = prepared
        self.current = first
        self.messages = list(prepared.messages)
        self.usage: dict[str, object] = {}
        self.usage_chunk: ChatChunk | None = None

    async def chunks(self) -> AsyncIterator[ChatChunk]:
        rounds = self.services.settings.remember_max_rounds
        request = self.prepared.request
        for round_ in range(rounds + 1):
            held: list[ChatChunk] = []  # finish chunks, until we know whether to go on
            this = _Round()
            async for chunk in self.current.chunks():
                out = self._filter(chunk, this, strip_role=round_ > 0)
                if out is None:
                    continue
                if any(c.get("finish_reason") for c in out.get("choices") or ()):
                    held.append(out)
                else:
                    yield out
            mine = this.mine()
            results = await _store(self.services, self.prepared, mine) if mine else []
            if not mine or this.theirs or round_ == rounds:
                for out in held:
                    yield out
                break
            self.messages += _continuation("".join(this.content) or None, mine, results)
            params = _params(self.prepared, with_tool=True)  # its calls stay hidden to the end
            self.current = await self.services.llm.stream(
                request.model, self.messages, params, headers=self.prepared.upstream_headers
            )
        if self.usage_chunk is not None:
            yield {**self.usage_chunk, "choices": [], "usage": cast(ChatUsage, dict(self.usage))}

    def _filter(self, chunk: ChatChunk, this: _Round, *, strip_role: bool) -> ChatChunk | None:
        """The chunk as the client may see it (None: nothing left of it)."""
        if chunk.get("usage"):
            add_usage(self.usage, chunk["usage"])
            self.usage_chunk = chunk.copy()
            self.usage_chunk.pop("usage")
            chunk = self.usage_chunk
        choices: list[ChunkChoice] = []
        for choice in chunk.get("choices") or ():
            delta: Delta = {**(choice.get("delta") or {})}
            if strip_role:
                delta.pop("role", None)
            if delta.get("content"):
                this.content.append(delta["content"])
            if delta.get("tool_calls"):
                kept = this.route(delta.pop("tool_calls"))
                if kept:
                    delta["tool_calls"] = kept
            finish = choice.get("finish_reason")
            if finish == "tool_calls" and not this.theirs:
                finish = "stop"  # only remember calls: to the client the answer just ended
            if not delta and not finish:
                continue
            choices.append({**choice, "delta": delta, "finish_reason": finish})
        if not choices:
            return None
        return {**chunk, "choices": choices}

    async def aclose(self) -> None:
        await self.current.aclose()
