"""A JSON object contextgate passes along without reading it (a provider's item, a schema)."""

from __future__ import annotations

from typing import Any

__all__ = ["JSONObject"]

JSONObject = dict[str, Any]
"""What ``json.loads`` gives for an object whose keys the code does not look into."""
