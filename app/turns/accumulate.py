"""Rebuild the assistant's answer from a stream's normalized chunks (choice 0)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeGuard

from app.wire.anthropic import ThinkingBlock
from app.wire.chat import ChatMessage, ChatUsage, ThinkingBlockParam, ToolCall
from app.wire.stream import ChatChunk, Delta

__all__ = ["StreamAccumulator", "add_thinking"]


@dataclass(slots=True)
class StreamAccumulator:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    thinking_blocks: list[ThinkingBlockParam] = field(default_factory=list)
    tool_calls: dict[int, ToolCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: ChatUsage | None = None

    def add_chunk(self, chunk: ChatChunk) -> None:
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            self.add_delta(choice.get("delta") or {})
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def add_delta(self, delta: Delta) -> None:
        if delta.get("content"):
            self.content.append(delta["content"])
        if delta.get("reasoning_content"):
            self.reasoning.append(delta["reasoning_content"])
        for block in delta.get("thinking_blocks") or ():
            self._add_thinking(block)
        for call in delta.get("tool_calls") or ():
            slot = self.tool_calls.setdefault(
                call.get("index", 0),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            if call.get("id"):
                slot["id"] = call["id"]
            function = call.get("function") or {}
            if function.get("name"):
                slot["function"]["name"] += function["name"]
            if function.get("arguments"):
                slot["function"]["arguments"] += function["arguments"]

    def _add_thinking(self, block: ThinkingBlockParam) -> None:
        add_thinking(self.thinking_blocks, block)

    def message(self) -> ChatMessage:
        message: ChatMessage = {"role": "assistant", "content": "".join(self.content) or None}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.thinking_blocks:
            message["thinking_blocks"] = self.thinking_blocks
        return message


def add_thinking(blocks: list[ThinkingBlockParam], block: ThinkingBlockParam) -> None:
    """Thinking arrives as text pieces, then its signature (which closes the block);
    a redacted block arrives whole. Kept byte-for-byte: the provider checks them."""
    if not _is_thinking(block):
        blocks.append(block.copy())
        return
    last = blocks[-1] if blocks else None
    if last is not None and _is_thinking(last) and not last.get("signature"):
        open_block = last
    else:
        open_block = ThinkingBlock(type="thinking", thinking="")
        blocks.append(open_block)
    open_block["thinking"] += block.get("thinking") or ""
    if block.get("signature"):
        open_block["signature"] = block["signature"]


def _is_thinking(block: ThinkingBlockParam) -> TypeGuard[ThinkingBlock]:
    fields: Mapping[str, object] = block
    return fields.get("type") == "thinking"
