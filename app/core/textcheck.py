"""Strings that cannot be stored or sent are refused at the edge, with the field they are in;
so is JSON nested deeper than every serializer on its way can take (app/core/jsondepth.py).

Two kinds of JSON string pass pydantic but break later: a NUL character (``\\u0000``), which
PostgreSQL refuses in text and JSON columns (SQLite stores it: the two would disagree), and a
lone UTF-16 surrogate (``\\ud800``), which is not Unicode and cannot be encoded as UTF-8 for the
database or the upstream (it used to answer 500, or a 502 blamed on the upstream). Both are
refused on every database alike: 400 ``invalid_string`` with ``param`` the field's path, in the
door's envelope, before anything is stored; likewise a NUL in the URL path or query.

``TextCheckMiddleware`` reads a JSON body when the app first asks for it; only a body holding
such an escape at all (one regex over the bytes) is parsed again to find the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final

import orjson
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import BadRequest, ContextGateError, error_response
from app.core.jsondepth import DEFAULT_MAX_JSON_DEPTH, scan_exceeds
from app.core.parsed_body import PARSED_JSON

__all__ = [
    "RequestRejected",
    "TextCheckMiddleware",
    "bad_string",
    "find_bad_string",
    "shown",
]

# \u0000 or a \uD800-\uDFFF escape, in the raw JSON (escaped backslashes are sorted out later).
_SUSPECT = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
# A JSON number of 19 digits or more may not fit the 64 bits orjson (and so every door's
# serialization, hashing and storage) handles. Found as a run of 19 digits in the body with
# every digit mapped to "0" and every other byte to " ": a translate and a substring search
# (~1 ms for an agent's 600 KB body) instead of a regex that tries every position (~11 ms).
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * 19
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1

NOT_PARSED: Final = object()
"""``check_json_body``'s value for a body orjson did not parse."""


class RequestRejected(HTTPException):
    """Raised from ``receive()``: FastAPI lets an HTTPException from there through unchanged
    (any other exception becomes a generic 400), and the error handlers render ``error`` in
    the door's envelope."""

    def __init__(self, error: ContextGateError) -> None:
        super().__init__(status_code=error.status_code, detail=error.message)
        self.error = error


def bad_string(value: str) -> str | None:
    """Why ``value`` cannot be stored or sent (a NUL, a lone surrogate), or None."""
    match = _BAD_CHAR.search(value)
    if match is None:
        return None
    if match.group() == "\x00":
        return "contains a NUL character (\\u0000)"
    return f"contains a lone UTF-16 surrogate (\\u{ord(match.group()):04x}), which is not Unicode"


def shown(key: str) -> str:
    """``key`` as it can be echoed in an error's ``param`` and a log line: a NUL or a lone
    surrogate written out as its JSON escape (neither can be encoded as UTF-8)."""
    return _BAD_CHAR.sub(lambda match: f"\\u{ord(match.group()):04x}", key)


def find_bad_string(value: object, path: str = "") -> tuple[str, str] | None:
    """(the field's dotted path, why) of the first unusable string (keys too) or integer
    outside 64 bits in a JSON value."""
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            reason = bad_string(item)
            if reason is not None:
                return where, reason
        elif isinstance(item, int) and not _INT_MIN <= item <= _INT_MAX:
            return where, _OUT_OF_RANGE
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                child_path = f"{where}.{shown(str(key))}" if where else shown(str(key))
                reason = bad_string(str(key))
                if reason is not None:
                    return child_path, f"has a key that {reason}"
                stack.append((child, child_path))
        elif isinstance(item, list):
            stack.extend(
                (child, f"{where}.{index}" if where else str(index))
                for index, child in reversed(list(enumerate(item)))
            )
    return None


_OUT_OF_RANGE = "is an integer outside the 64-bit range"


def rejection(param: str, reason: str) -> BadRequest:
    if reason == _OUT_OF_RANGE:
        return BadRequest(
            f"Invalid request at '{param}': {reason}.", param=param, code="integer_out_of_range"
        )
    return BadRequest(
        f"Invalid request at '{param}': the string {reason}.", param=param, code="invalid_string"
    )


def check_json_body(body: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> object:
    """Raise ``RequestRejected`` when a JSON body nests deeper than ``max_depth`` or holds a
    NUL, a lone surrogate or an integer outside 64 bits. Returns the body as orjson parsed it
    (the route takes it: app/core/parsed_body.py), or ``NOT_PARSED``.

    A body orjson parses is judged in one walk over its containers, strings and numbers
    (~0.1 ms for an agent's 600 KB history, where three scans of the bytes took ~1 ms): orjson
    has already refused lone surrogates, so what is left is depth, NUL and the integers. An
    integer literal past 64 bits comes out of orjson as a float of that size; a float that large
    sends the body to the stdlib parse, which keeps the integer, to tell the two apart."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        _check_unparsed(body, max_depth)
        return NOT_PARSED
    verdict = _walk(parsed, max_depth)
    if verdict is _TOO_DEEP:
        raise RequestRejected(_too_deep(max_depth))
    if verdict is not None:
        found = find_bad_string(json.loads(body))
        if found is not None:
            raise RequestRejected(rejection(*found))
    return parsed


def _check_unparsed(body: bytes, max_depth: int) -> None:
    """The same judgement for what orjson refused (a lone surrogate, NaN, nesting past 1,024
    levels, not JSON at all): the nesting on the bytes, then a regex for the escapes."""
    if scan_exceeds(body, max_depth):
        raise RequestRejected(_too_deep(max_depth))
    if not _SUSPECT.search(body) and _LONG_RUN not in body.translate(_DIGITS):
        return
    try:
        checked = json.loads(body)
    except (ValueError, RecursionError):
        return  # not JSON (or unbalanced and deep): the app answers with its 400
    found = find_bad_string(checked)
    if found is not None:
        raise RequestRejected(rejection(*found))


def _too_deep(max_depth: int) -> BadRequest:
    return BadRequest(
        f"The JSON body nests arrays and objects deeper than {max_depth} levels "
        "(CONTEXTGATE_MAX_JSON_DEPTH).",
        code="json_too_deep",
    )


_TOO_DEEP: Final = "too deep"
_LOOK_CLOSER: Final = "look closer"
_FLOAT_LIMIT = float(2**63)


def _walk(value: object, limit: int) -> str | None:
    """``_TOO_DEEP``, ``_LOOK_CLOSER`` (a NUL, an integer or a float past 64 bits: the field is
    found by ``find_bad_string``) or None, for a value orjson parsed."""
    if not isinstance(value, (dict, list)):
        return _scalar_verdict(value)
    if limit < 1:
        return _TOO_DEEP
    pending: list[tuple[dict[str, object] | list[object], int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if type(node) is dict:
            if "\x00" in "".join(node):  # a key (orjson's keys are strings)
                return _LOOK_CLOSER
            children: Iterable[object] = node.values()
        else:
            children = node
        for child in children:
            kind = type(child)
            if kind is str:
                if "\x00" in child:  # type: ignore[operator]
                    return _LOOK_CLOSER
            elif kind is dict or kind is list:
                if depth >= limit:
                    return _TOO_DEEP
                pending.append((child, depth + 1))  # type: ignore[arg-type]
            elif kind is int or kind is float:
                if not -_FLOAT_LIMIT < child < _FLOAT_LIMIT:  # type: ignore[operator]
                    return _LOOK_CLOSER
    return None


def _scalar_verdict(value: object) -> str | None:
    if isinstance(value, str):
        return _LOOK_CLOSER if "\x00" in value else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None if -_FLOAT_LIMIT < value < _FLOAT_LIMIT else _LOOK_CLOSER
    return None


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return b"json" in value.lower()
    return True  # FastAPI reads an undeclared body as JSON


class TextCheckMiddleware:
    """Refuses NUL in the URL path/query, and NUL or lone surrogates (values or keys) in JSON
    bodies and bodies nested deeper than ``max_depth``."""

    def __init__(self, app: ASGIApp, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> None:
        self.app = app
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if _BAD_CHAR.search(path):
            reason = bad_string(path) or "is not valid"
            await error_response(rejection("path", reason))(scope, receive, send)
            return
        if b"%00" in scope.get("query_string", b""):
            await error_response(rejection("query", "contains a NUL character (%00)"))(
                scope, receive, send
            )
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH") or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        await self.app(scope, _checked_receive(scope, receive, self.max_depth), send)


def _checked_receive(scope: Scope, receive: Receive, max_depth: int) -> Receive:
    """``receive`` that hands the whole body over in one message, checked; the value the
    check parsed, if it did, goes into the scope for the route (app/core/parsed_body.py)."""
    read = False

    async def checked() -> Message:
        nonlocal read
        if read:
            return await receive()
        read = True
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        parsed = check_json_body(body, max_depth)
        if parsed is not NOT_PARSED:
            scope[PARSED_JSON] = parsed
        return {"type": "http.request", "body": body, "more_body": False}

    return checked
