"""The wire's types for pydantic fields that hold chat-form JSON.

pydantic cannot build a schema from ``typing.TypedDict`` on Python 3.11 (app/wire's kind), and
these fields are never validated beyond "a list of objects": what is stored was checked at the
door. So mypy sees the wire's TypedDicts, and pydantic the plain JSON it always checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["StoredContent", "StoredThinkingBlock", "StoredToolCall"]

if TYPE_CHECKING:
    from app.wire.chat import AssistantContent as StoredContent
    from app.wire.chat import ThinkingBlockParam as StoredThinkingBlock
    from app.wire.chat import ToolCall as StoredToolCall
else:
    from app.wire.json import JSONObject

    StoredContent = object  # any JSON: pydantic checks nothing (a string, parts or None)
    StoredThinkingBlock = JSONObject
    StoredToolCall = JSONObject
