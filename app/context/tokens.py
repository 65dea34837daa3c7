"""Token counting with tiktoken, offline (see app.core.offline), one encoder per model."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson
import tiktoken

__all__ = ["MESSAGE_OVERHEAD", "REPLY_PRIMER", "TokenCounter", "text_of"]

# Per-message overhead of OpenAI's chat format (role and separators), and the reply primer.
MESSAGE_OVERHEAD = 4
REPLY_PRIMER = 3
IMAGE_TOKENS = 85


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


@lru_cache(maxsize=256)
def _encoding_for(model: str) -> tiktoken.Encoding:
    name = model.rsplit("/", 1)[-1]
    try:
        return tiktoken.encoding_for_model(name)
    except KeyError:
        pass
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")):
        return tiktoken.get_encoding("o200k_base")
    return tiktoken.get_encoding("cl100k_base")


class TokenCounter:
    """Counts tokens the way OpenAI bills chat messages; close enough for other providers."""

    def encoding(self, model: str) -> tiktoken.Encoding:
        return _encoding_for(model)

    def count_text(self, text: str, model: str) -> int:
        if not text:
            return 0
        return len(_encoding_for(model).encode(text, disallowed_special=()))

    def count_message(self, message: dict[str, Any], model: str) -> int:
        tokens = MESSAGE_OVERHEAD + self.count_text(text_of(message.get("content")), model)
        content = message.get("content")
        if isinstance(content, list):
            tokens += IMAGE_TOKENS * sum(
                1 for part in content if isinstance(part, dict) and part.get("type") == "image_url"
            )
        if message.get("name"):
            tokens += 1 + self.count_text(str(message["name"]), model)
        if message.get("tool_calls"):
            tokens += self.count_text(orjson.dumps(message["tool_calls"]).decode(), model)
        if message.get("tool_call_id"):
            tokens += 1
        return tokens

    def count_messages(self, messages: list[dict[str, Any]], model: str) -> int:
        return REPLY_PRIMER + sum(self.count_message(message, model) for message in messages)
