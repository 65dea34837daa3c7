"""The doors' route class: a well-formed turn goes from its parsed body to the endpoint
without FastAPI's generic request handling.

FastAPI's handler solves an endpoint's parameters generically on every request: dependency
cache keys, scopes, a sub-solve per dependency, the content type parsed through
``email.message``, telemetry hooks. For a door's request (a JSON body, two optional headers,
``get_caller`` and ``get_state``) that machinery cost ~0.3 ms of a short turn's ~8 ms on the
bench machine (bench/README.md, item 38). ``DoorRoute`` does the same steps for that one shape
of endpoint: the body validated by FastAPI's own field for it, the ``str | None`` headers read
by their alias, the request-only dependencies awaited in their order, the endpoint called.
Whatever is not that shape, and every request that does not go straight through (no JSON
content type, an unreadable or empty body, JSON or validation errors, dependency overrides,
FastAPI telemetry on), is FastAPI's to answer, with the body already read: its errors, status
codes and order stay exactly FastAPI's. The body comes parsed (app/core/parsed_body.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

import fastapi.routing
from fastapi import params
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive

from app.core.parsed_body import ParsedJSONRequest

try:  # FastAPI 0.16x: its own OpenTelemetry hooks, which only its handler runs
    from fastapi import telemetry
except ImportError:  # pragma: no cover - older FastAPI
    telemetry = None  # type: ignore[assignment]


__all__ = ["DoorPlan", "DoorRoute", "door_plan"]

Endpoint = Callable[..., Awaitable[object]]
_UNUSED_PARAMETERS = (
    "websocket_param_name",
    "http_connection_param_name",
    "response_param_name",
    "background_tasks_param_name",
    "security_scopes_param_name",
)


@dataclass(frozen=True, slots=True)
class DoorPlan:
    """How a door's endpoint gets its arguments, read once from FastAPI's model of it."""

    endpoint: Endpoint
    body: str  # the body's parameter
    body_field: Any  # FastAPI's ModelField for it (its ``validate`` is what FastAPI runs)
    request: str | None  # the parameter taking the Request, if any
    headers: tuple[tuple[str, str], ...]  # (parameter, header name), each ``str | None``
    dependencies: tuple[tuple[str, str, Endpoint], ...]  # (parameter, its request param, call)


def door_plan(route: Any) -> DoorPlan | None:
    """The plan for ``route`` (an ``APIRoute``, or FastAPI's effective form of one: see
    ``effective_route``), or None when its endpoint is not a door's shape."""
    dependant, field = route.dependant, route.body_field
    if field is None or len(dependant.body_params) != 1 or route.response_field is not None:
        return None
    if getattr(route, "_embed_body_fields", True) or isinstance(field.field_info, params.Form):
        return None
    if dependant.path_params or dependant.query_params or dependant.cookie_params:
        return None
    if any(getattr(dependant, name, None) is not None for name in _UNUSED_PARAMETERS):
        return None
    if not inspect.iscoroutinefunction(dependant.call):
        return None
    headers = tuple(_header(f) for f in dependant.header_params)
    dependencies = tuple(_request_only(sub) for sub in dependant.dependencies)
    if None in headers or None in dependencies:
        return None
    return DoorPlan(
        endpoint=cast(Endpoint, dependant.call),
        body=dependant.body_params[0].name,
        body_field=field,
        request=dependant.request_param_name,
        headers=cast(tuple[tuple[str, str], ...], headers),
        dependencies=cast(tuple[tuple[str, str, Endpoint], ...], dependencies),
    )


def effective_route(route: APIRoute) -> Any:
    """The route as FastAPI builds its handler in this app. FastAPI 0.16x shares an included
    router's routes between apps and hands ``get_route_handler`` the app's own form of the
    route (its overrides provider, the include's dependencies) through a context variable;
    earlier versions copy the route itself into each app."""
    current = getattr(fastapi.routing, "_effective_route_context_var", None)
    context = current.get() if current is not None else None
    if context is not None and getattr(context, "original_route", None) is route:
        return context
    return route


def _header(field: Any) -> tuple[str, str] | None:
    """An optional string header FastAPI reads by its alias alone."""
    info = field.field_info
    if info.annotation != (str | None) or info.default is not None or info.validation_alias:
        return None
    if not isinstance(field.alias, str) or not field.alias:
        return None
    return field.name, field.alias


def _request_only(sub: Dependant) -> tuple[str, str, Endpoint] | None:
    """An ``async def`` dependency whose only parameter is the request."""
    if sub.name is None or sub.request_param_name is None or sub.call is None:
        return None
    if not inspect.iscoroutinefunction(sub.call):
        return None
    others = (
        sub.dependencies,
        sub.path_params,
        sub.query_params,
        sub.header_params,
        sub.cookie_params,
        sub.body_params,
    )
    if any(others) or any(getattr(sub, n, None) is not None for n in _UNUSED_PARAMETERS):
        return None
    return sub.name, sub.request_param_name, cast(Endpoint, sub.call)


def _raising(error: BaseException) -> Receive:
    """A ``receive`` that fails as reading the body did, for FastAPI to answer it."""

    async def receive() -> Message:
        raise error

    return receive


def _is_json(request: Request) -> bool:
    content_type = request.headers.get("content-type")
    return content_type is not None and (
        content_type.partition(";")[0].strip().lower() == "application/json"
    )


class DoorRoute(APIRoute):
    """``APIRoute`` with the doors' direct path (see the module docstring); its requests get
    the body the text check parsed (``ParsedJSONRequest``)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        standard = super().get_route_handler()
        route = effective_route(self)
        plan = door_plan(route)
        overrides = route.dependency_overrides_provider

        async def door_handler(request: Request) -> Response:
            request = ParsedJSONRequest(request.scope, request.receive)
            if (
                plan is None
                or getattr(overrides, "dependency_overrides", None)
                or (telemetry is not None and telemetry.get_telemetry_data() is not None)
                or not _is_json(request)
            ):
                return await standard(request)
            try:
                body = await request.body()
            except Exception as error:
                return await standard(ParsedJSONRequest(request.scope, _raising(error)))
            try:
                value = await request.json() if body else None
            except Exception:
                value = None
            if value is None:  # empty, not JSON, or JSON null: FastAPI's errors
                return await standard(request)
            validated, errors = plan.body_field.validate(value, {}, loc=("body",))
            if errors:
                return await standard(request)
            arguments: dict[str, object] = {plan.body: validated}
            if plan.request is not None:
                arguments[plan.request] = request
            for name, header in plan.headers:
                arguments[name] = request.headers.get(header)
            for name, request_name, call in plan.dependencies:
                arguments[name] = await call(**{request_name: request})
            response = await plan.endpoint(**arguments)
            if not isinstance(response, Response):
                raise TypeError(f"{self.path}: a door's endpoint returns a Response")
            return response

        return door_handler
