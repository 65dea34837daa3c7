"""A JSON body is parsed once: the route gets what the body check already parsed.

``TextCheckMiddleware`` (app/core/textcheck.py) parses a JSON body with orjson to check it
(nesting, NUL, 64-bit integers) and leaves the value in the ASGI scope; FastAPI would parse the
same bytes again with the stdlib (~1.3 ms for an agent's 700 KiB history). The
routes of the doors use ``DoorRoute`` (app/core/door_route.py, FastAPI's documented custom
route class), whose requests answer ``json()`` with that value. Whatever orjson refused (NaN,
a lone surrogate, an integer past 64 bits) was not left there, and is parsed by the stdlib as
before.
"""

from __future__ import annotations

from typing import Final

from starlette.requests import Request

__all__ = ["PARSED_JSON", "ParsedJSONRequest"]

PARSED_JSON: Final = "contextgate.parsed_json"


class ParsedJSONRequest(Request):
    async def json(self) -> object:
        if PARSED_JSON in self.scope and not hasattr(self, "_json"):
            # taken out of the scope, which lives as long as a streamed answer does
            self._json = self.scope.pop(PARSED_JSON)
        return await super().json()
