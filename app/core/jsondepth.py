"""How deep a JSON body nests, measured on its bytes before anything parses it.

Every serializer on a request's way has a nesting limit of its own: pydantic's ``model_dump``
("maximum serialization depth"), orjson (255 levels), the stdlib parser (Python's recursion
limit). A body nested past one of them used to answer 500 somewhere inside (or a 502 blamed on
the upstream). It is refused once, at the door, well below all of them:
``CONTEXTGATE_MAX_JSON_DEPTH`` (64 by default; a tool's JSON schema rarely nests past 20).

The check costs two ``bytes.count`` calls for most bodies. A body with more brackets than the
limit (an agent's whole history) is parsed by orjson, which refuses past 1,024 levels by itself,
and its arrays and objects are walked: ~1 ms per MB, where cutting the strings out of the
bytes took ~5 ms per MB. Only what orjson refuses (nesting past its own limit, a lone surrogate
escape) has its strings cut out and its brackets peeled level by level.
"""

from __future__ import annotations

from typing import Final

import orjson

__all__ = ["DEFAULT_MAX_JSON_DEPTH", "NOT_PARSED", "depth_check", "nesting_exceeds"]

DEFAULT_MAX_JSON_DEPTH = 64

# Every bracket as "[" or "]"; every other byte dropped.
_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


NOT_PARSED: Final = object()
"""``depth_check``'s value when it judged the bytes without parsing them."""


def nesting_exceeds(body: bytes, limit: int) -> bool:
    """Whether the arrays and objects of the JSON text ``body`` nest deeper than ``limit``.

    Invalid JSON (unbalanced brackets) is not judged here: the parser refuses it after."""
    return depth_check(body, limit)[0]


def depth_check(body: bytes, limit: int) -> tuple[bool, object]:
    """(``nesting_exceeds``, the value orjson parsed on the way, or ``NOT_PARSED``): a body
    parsed here need not be parsed again (app/core/parsed_body.py hands it to the route)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False, NOT_PARSED
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return scan_exceeds(body, limit), NOT_PARSED
    return _value_exceeds(parsed, limit), parsed


def _value_exceeds(value: object, limit: int) -> bool:
    """Whether a parsed value's arrays and objects nest deeper than ``limit`` (iteratively:
    only containers are visited, and the walk stops at the first one too deep)."""
    if not isinstance(value, (dict, list)):
        return False
    if limit < 1:
        return True
    pending: list[tuple[dict[object, object] | list[object], int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                pending.append((child, depth + 1))
    return False


def scan_exceeds(body: bytes, limit: int) -> bool:
    """The same judgement on the bytes alone, for what orjson does not parse."""
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
