"""The methods a path answers, for the ``Allow`` header of a 405 (RFC 9110 §15.5.6).

Starlette's 405 names only the methods of the first route that matched the path; a path such
as ``/v1/keys`` has one route per method, so the header must be gathered from all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from starlette.applications import Starlette

__all__ = ["allowed_methods"]


def _routes(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for route in routes:
        if hasattr(route, "original_router"):  # an included router, kept nested by FastAPI
            yield from _routes(route.original_router.routes, prefix + route.include_context.prefix)
        elif getattr(route, "methods", None) and hasattr(route, "path_regex"):
            yield prefix, route


def allowed_methods(app: Starlette, path: str) -> list[str]:
    methods: set[str] = set()
    for prefix, route in _routes(list(app.routes)):
        if not path.startswith(prefix):
            continue
        if route.path_regex.match(path[len(prefix) :]):
            methods.update(route.methods)
    return sorted(methods)
