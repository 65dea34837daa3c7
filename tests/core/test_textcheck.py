"""app/core/textcheck.py ``check_json_body``: one walk over what orjson parsed refuses NUL and
integers past 64 bits with the field's path, and lets everything else through unchanged."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from app.core.textcheck import NOT_PARSED, RequestRejected, check_json_body


def _refusal(raw: bytes) -> tuple[str | None, str | None]:
    with pytest.raises(RequestRejected) as refused:
        check_json_body(raw, 64)
    return refused.value.error.code, refused.value.error.param


@pytest.mark.parametrize(
    ("raw", "code", "param"),
    [
        (b'{"a": [1, {"b": "x\\u0000y"}]}', "invalid_string", "a.1.b"),
        (b'{"a": {"k\\u0000": 1}}', "invalid_string", "a.k\\u0000"),
        (b'"\\u0000"', "invalid_string", ""),
        (b'{"n": 9223372036854775808}', "integer_out_of_range", "n"),  # 2**63: fits u64 only
        (b'{"n": [-9223372036854775809]}', "integer_out_of_range", "n.0"),
        (b'{"n": 57525901118819988170283679744}', "integer_out_of_range", "n"),  # a float to orjson
        (b'{"s": "\\ud800", "n": 1}', "invalid_string", "s"),  # orjson refuses: the bytes path
    ],
)
def test_refused_with_the_field(raw: bytes, code: str, param: str) -> None:
    assert _refusal(raw) == (code, param)


@pytest.mark.parametrize(
    "value",
    [
        {"n": 2**63 - 1, "m": -(2**63), "s": "1" * 40, "t": True, "z": None},
        {"f": 1e30, "g": -1.5e300, "h": 12345678901234567890.5, "nested": [[{"a": [0.0]}]]},
        [],
        "plain",
        12,
    ],
)
def test_accepted_and_returned_as_orjson_parsed_it(value: Any) -> None:
    raw = json.dumps(value).encode()
    assert check_json_body(raw, 64) == orjson.loads(raw)


def test_what_orjson_refuses_is_left_to_the_stdlib() -> None:
    assert check_json_body(b'{"x": NaN}', 64) is NOT_PARSED
    assert check_json_body(b"not json", 64) is NOT_PARSED
