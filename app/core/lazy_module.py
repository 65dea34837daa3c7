"""A module imported at its first use, for the libraries a server needs only later.

``contextgate serve`` answers its first request without numpy (~60-80 ms of imports, about
5% of its start, issue 26): vectors are computed after the answer, memories retrieved only
where there are some. A module that uses numpy binds ``np = lazy_module("numpy", globals(),
"np")``; the first attribute read imports numpy and puts it in that name's place, so later
reads are the module's own (no proxy in the way)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["lazy_module"]


class _LazyModule:
    __slots__ = ("_name", "_namespace", "_binding")

    def __init__(self, name: str, namespace: dict[str, Any], binding: str) -> None:
        self._name = name
        self._namespace = namespace
        self._binding = binding

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self._name)  # import's own lock: once, thread-safe
        self._namespace[self._binding] = module
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported at its first use>"


def lazy_module(name: str, namespace: dict[str, Any], binding: str) -> Any:
    """A stand-in for module ``name``, bound to ``namespace[binding]`` (the caller's
    ``globals()``), that imports it and takes its place at the first attribute read."""
    return _LazyModule(name, namespace, binding)
