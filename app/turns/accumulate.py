"""Rebuild the assistant's answer from a stream's normalized chunks (choice 0)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["StreamAccumulator"]


@dataclass(slots=True)
class StreamAccumulator:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    thinking_blocks: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None

    def add_chunk(self, chunk: dict[str, Any]) -> None:
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            self.add_delta(choice.get("delta") or {})
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def add_delta(self, delta: dict[str, Any]) -> None:
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

    def _add_thinking(self, block: dict[str, Any]) -> None:
        """Thinking arrives as text pieces, then its signature (which closes the block);
        a redacted block arrives whole. Kept byte-for-byte: the provider checks them."""
        if block.get("type") != "thinking":
            self.thinking_blocks.append(dict(block))
            return
        last = self.thinking_blocks[-1] if self.thinking_blocks else None
        if last is None or last.get("type") != "thinking" or last.get("signature"):
            last = {"type": "thinking", "thinking": ""}
            self.thinking_blocks.append(last)
        last["thinking"] += block.get("thinking") or ""
        if block.get("signature"):
            last["signature"] = block["signature"]

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.thinking_blocks:
            message["thinking_blocks"] = self.thinking_blocks
        return message
