"""The nesting check: the walk over what orjson parsed (app/core/textcheck.py) and the byte-level
scan for what it refuses (app/core/jsondepth.py) both agree with the parsed value's depth."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.jsondepth import scan_exceeds
from app.core.textcheck import RequestRejected, check_json_body

# Strings full of brackets, quotes and backslashes: none of them is nesting.
TRICKY = st.text(st.sampled_from('[]{}"\\ab'), max_size=8)
VALUES = st.recursive(
    st.none() | st.integers() | TRICKY,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TRICKY, children, max_size=3),
    max_leaves=30,
)


def nesting_exceeds(raw: bytes, limit: int) -> bool:
    """What the body check decides about the nesting of ``raw``."""
    try:
        check_json_body(raw, limit)
    except RequestRejected as refused:
        return refused.error.code == "json_too_deep"
    return False


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    return 0


def _wrap(value: Any, levels: int) -> Any:
    for index in range(levels):
        value = [value] if index % 2 else {'k]\\"': value}
    return value


@settings(max_examples=300, derandomize=True, database=None)
@given(VALUES, st.integers(0, 12), st.integers(1, 16))
def test_agrees_with_the_parsed_depth(value: Any, levels: int, limit: int) -> None:
    wrapped = _wrap(value, levels)
    raw = json.dumps(wrapped).encode()
    assert nesting_exceeds(raw, limit) == (_depth(wrapped) > limit)
    # The byte scan (what orjson does not parse falls back to) judges the same.
    assert scan_exceeds(raw, limit) == (_depth(wrapped) > limit)


def test_limits_and_invalid_json() -> None:
    assert not nesting_exceeds(b"[" * 64 + b"]" * 64, 64)
    assert nesting_exceeds(b"[" * 65 + b"]" * 65, 64)
    assert not nesting_exceeds(b'["' + b"[" * 500 + b'"]', 64)  # inside a string
    assert not nesting_exceeds(b"[" * 500, 64)  # unbalanced: the parser refuses it


def test_what_orjson_refuses_is_judged_on_the_bytes() -> None:
    """orjson refuses past 1,024 levels and a lone surrogate escape (which the stdlib parser
    takes, and the door then refuses with its own message): the bytes are judged instead."""
    assert nesting_exceeds(b"[" * 2000 + b"]" * 2000, 64)
    lone = b'["\\ud800", ' + b"[" * 70 + b"1" + b"]" * 70 + b"]"
    assert nesting_exceeds(lone, 64)
    assert not nesting_exceeds(b'["\\ud800", ' + b"[" * 70 + b"]" * 70 + b"]", 80)
    assert not nesting_exceeds(b'"' + b"[" * 100 + b'"', 64)  # a string, not nesting
