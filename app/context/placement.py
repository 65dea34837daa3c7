"""Rewrite the window's messages with processed artifacts (copies; stored messages untouched).

Tool results stay tool messages (every tool call needs its result) with processed content;
documents go into one context block placed right before the newest user message.
"""

from __future__ import annotations

from app.conversations.messages import ConversationMessage
from app.tokens.counter import TokenCounter

__all__ = ["place_block", "replace_tool_messages"]


def replace_tool_messages(
    messages: list[ConversationMessage], processed: dict[int, str], tokens: TokenCounter, model: str
) -> tuple[list[ConversationMessage], int, int]:
    """Copies of ``messages`` whose tool results carry their processed content.

    Returns the copies, the processed messages' tokens and the tokens saved. Later messages'
    positions move back by what was saved, so the history fit sees the processed sizes.
    """
    out: list[ConversationMessage] = []
    used = saved = 0
    for message in messages:
        content = processed.get(message.sequence_number) if message.role == "tool" else None
        update: dict[str, object] = {"start_tokens": message.start_tokens - saved}
        if content is not None:
            sent = {"role": "tool", "content": content, "tool_call_id": message.tool_call_id}
            count = tokens.count_message(sent, model)
            update |= {"content": content, "token_count": count}
            used += count
            saved += max(0, message.token_count - count)
        out.append(message.model_copy(update=update) if content is not None or saved else message)
    return out, used, saved


def place_block(
    current: list[ConversationMessage], block: str, tokens: TokenCounter, model: str
) -> tuple[list[ConversationMessage], int]:
    message = {"role": "user", "content": block}
    count = tokens.count_message(message, model)
    block_message = ConversationMessage(role="user", content=block, token_count=count, stored=False)
    index = next((i for i in range(len(current) - 1, -1, -1) if current[i].role == "user"), 0)
    return [*current[:index], block_message, *current[index:]], count
