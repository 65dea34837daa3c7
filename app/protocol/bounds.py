"""Size limits of values contextgate stores that have no limit of their own (issue 24).

Message text, attachments, tools and the body have their own limits (app/core/limits.py); these
are the rest, each a clear 400 at the door, before anything is stored:

- ``user`` (chat, Responses, embeddings; ``metadata.user_id`` on /v1/messages): at most 200
  characters, as long as a long-term memory's user may be (``POST /v1/memories``); it keys
  stored memories and message vectors.
- Responses ``metadata``: OpenAI's own rule, at most 16 pairs, keys up to 64 characters and
  string values up to 512 (it is stored with the response and echoed).
- Unknown fields of a stored object (a Responses input item or content part, kept as given
  since OpenAI adds fields often): at most 16 KiB of JSON per object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import orjson
from pydantic import AfterValidator

__all__ = [
    "MAX_EXTRA_BYTES",
    "MAX_USER_CHARS",
    "Metadata",
    "check_extra_size",
]

MAX_USER_CHARS = 200
MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512
MAX_EXTRA_BYTES = 16 * 1024


def _metadata(value: dict[str, str]) -> dict[str, str]:
    if len(value) > MAX_METADATA_PAIRS:
        raise ValueError(f"metadata may have at most {MAX_METADATA_PAIRS} pairs")
    for key, item in value.items():
        if len(key) > MAX_METADATA_KEY:
            raise ValueError(f"metadata keys may have at most {MAX_METADATA_KEY} characters")
        if len(item) > MAX_METADATA_VALUE:
            raise ValueError(
                f"metadata values may have at most {MAX_METADATA_VALUE} characters "
                f"('{key}' has {len(item)})"
            )
    return value


Metadata = Annotated[dict[str, str], AfterValidator(_metadata)]


def check_extra_size(extra: Mapping[str, object] | None) -> None:
    """Raise ValueError when an object's unknown fields take more than MAX_EXTRA_BYTES."""
    if not extra:
        return
    size = len(orjson.dumps(extra))
    if size > MAX_EXTRA_BYTES:
        names = ", ".join(sorted(extra)[:5])
        raise ValueError(
            f"unknown fields ({names}) take {size} bytes; at most {MAX_EXTRA_BYTES} are kept"
        )
