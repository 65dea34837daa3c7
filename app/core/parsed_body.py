"""A JSON body is parsed once: the route gets what the body check already parsed.

``TextCheckMiddleware`` (app/core/textcheck.py) parses a JSON body with orjson to check it
(nesting, NUL, 64-bit integers) and leaves the value in the ASGI scope; FastAPI would parse the
same bytes again with the stdlib (~1.3 ms for an agent's 700 KiB history). The
routes of the doors use ``ParsedJSONRoute`` (FastAPI's documented custom route class), whose
requests answer ``json()`` with that value. Whatever orjson refused (NaN, a lone surrogate, an
integer past 64 bits) was not left there, and is parsed by the stdlib as before.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Final

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["PARSED_JSON", "ParsedJSONRequest", "ParsedJSONRoute"]

PARSED_JSON: Final = "contextgate.parsed_json"


class ParsedJSONRequest(Request):
    async def json(self) -> object:
        if PARSED_JSON in self.scope and not hasattr(self, "_json"):
            # taken out of the scope, which lives as long as a streamed answer does
            self._json = self.scope.pop(PARSED_JSON)
        return await super().json()


class ParsedJSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def parsed_json_handler(request: Request) -> Response:
            return await handler(ParsedJSONRequest(request.scope, request.receive))

        return parsed_json_handler
