"""One clear sentence for a request body that failed validation.

Pydantic reports a value that fits no member of a union once per member, with the member's
label in the location (``input.str``, ``input.list[tagged-union[…]].0.function_call_output``).
A client wants the one that applies to what it sent, at a path of its own fields: the deepest
error (the member that matched the value's shape and failed further in), with the labels
removed (``input.0.call_id``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic_core import ErrorDetails

_MEMBER_LABEL = re.compile(r"^(?:[A-Z][A-Za-z0-9]*|str|int|float|bool|bytes|none|dict|list)$")
_TYPE_PREFIX = "Input should be "


def _is_member_label(part: str) -> bool:
    return "[" in part or bool(_MEMBER_LABEL.match(part))


def client_path(loc: Sequence[int | str]) -> list[str]:
    """The location as the client's field path: no ``body``, no union member labels or tags."""
    path: list[str] = []
    tag_follows_index = False  # list[tagged-union[...]]: index, then the tag
    tag_next = False  # tagged-union[...]: the tag next
    for part in loc:
        if isinstance(part, int):
            path.append(str(part))
            tag_next, tag_follows_index = tag_follows_index, False
            continue
        if part == "body" and not path:
            continue
        if tag_next:
            tag_next = False
            continue
        if _is_member_label(part):
            if "tagged-union[" in part:
                if part.startswith("list["):
                    tag_follows_index = True
                else:
                    tag_next = True
            continue
        path.append(part)
    return path


def validation_message(errors: Sequence[ErrorDetails]) -> tuple[str, str | None]:
    """``("Invalid request at 'input.0.call_id': Field required", "input.0.call_id")``."""
    if not errors:
        return "Invalid request body.", None
    if any(error.get("type") == "json_invalid" for error in errors):
        return "Request body is not valid JSON.", None
    paths = [client_path(error.get("loc", ())) for error in errors]
    if all(not path for path in paths):  # the body itself: missing, or not an object
        if any(error.get("type") == "missing" for error in errors):
            return "The request needs a JSON body (an object).", None
        return "The request body must be a JSON object.", None
    deepest = max(range(len(errors)), key=lambda i: len(paths[i]))  # the first of the deepest
    chosen = paths[deepest]
    here = [str(errors[i].get("msg", "invalid value")) for i, p in enumerate(paths) if p == chosen]
    messages = list(dict.fromkeys(here))
    if len(messages) > 1 and all(m.startswith(_TYPE_PREFIX) for m in messages):
        # one value that is none of a union's types: "a valid string or a valid list"
        msg = _TYPE_PREFIX + " or ".join(m.removeprefix(_TYPE_PREFIX) for m in messages)
    else:
        msg = messages[0]
    # other errors elsewhere (not the union members this one shadows, on the path to it)
    others = {tuple(p) for p in paths if p != chosen and p != chosen[: len(p)]}
    param = ".".join(chosen) or None
    where = f" at '{param}'" if param else ""
    extra = f" (and {len(others)} more)" if others else ""
    return f"Invalid request{where}: {msg}{extra}", param
