"""What the in-process tool-loop tests send: an agent's one tool, reading files."""

from __future__ import annotations

from typing import Any

__all__ = ["READ_FILE_TOOLS"]

READ_FILE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
