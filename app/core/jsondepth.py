"""How deep a JSON body nests, measured on its bytes before anything parses it.

Every serializer on a request's way has a nesting limit of its own: pydantic's ``model_dump``
("maximum serialization depth"), orjson (255 levels), the stdlib parser (Python's recursion
limit). A body nested past one of them used to answer 500 somewhere inside (or a 502 blamed on
the upstream). It is refused once, at the door, well below all of them:
``CONTEXTGATE_MAX_JSON_DEPTH`` (64 by default; a tool's JSON schema rarely nests past 20).

A body orjson parses is judged on the parsed value (app/core/textcheck.py walks it once for
depth, NUL and 64-bit integers: ~0.1 ms for an agent's 600 KB history). Only what orjson
refuses (nesting past its own 1,024 levels, a lone surrogate escape, NaN) is judged here, on
the bytes: two ``bytes.count`` calls for most bodies; past the limit, the strings are cut out
and the brackets peeled level by level.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_JSON_DEPTH", "scan_exceeds"]

DEFAULT_MAX_JSON_DEPTH = 64

# Every bracket as "[" or "]"; every other byte dropped.
_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def scan_exceeds(body: bytes, limit: int) -> bool:
    """Whether the arrays and objects of the JSON text ``body`` nest deeper than ``limit``,
    judged on the bytes alone (for what orjson does not parse). Invalid JSON (unbalanced
    brackets) is not judged here: the parser refuses it after."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    brackets = _outside_strings(body).translate(_SQUARE, _NOT_BRACKET)
    # Each pass removes the innermost level (every "[]"): a body empties in `depth` passes.
    for _ in range(limit):
        if not brackets:
            return False
        peeled = brackets.replace(b"[]", b"")
        if len(peeled) == len(brackets):
            return False  # unbalanced: not JSON
        brackets = peeled
    return bool(brackets) and b"[]" in brackets


def _outside_strings(body: bytes) -> bytes:
    """``body`` without its JSON strings (brackets inside them are text, not nesting), with
    C-speed byte operations only: escaped backslashes out, then escaped quotes, then every
    other piece between quotes."""
    unescaped = body
    if b"\\" in unescaped:
        unescaped = unescaped.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(unescaped.split(b'"')[::2])
