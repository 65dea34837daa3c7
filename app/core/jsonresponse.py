"""Fast JSON responses (orjson)."""

from __future__ import annotations

import orjson
from starlette.responses import Response

__all__ = ["json_response"]


def json_response(
    payload: object, *, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY),
        status_code=status_code,
        media_type="application/json",
        headers=headers,
    )
