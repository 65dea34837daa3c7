"""An agent's long JSON body is parsed once: the value the body check parsed with orjson is
what the route validates (app/core/parsed_body.py); anything orjson refused is parsed by the
stdlib as before."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from pydantic import BaseModel

from app.core.door_route import DoorRoute
from app.core.textcheck import TextCheckMiddleware


class Body(BaseModel):
    items: list[Any]


def _app() -> FastAPI:
    router = APIRouter(route_class=DoorRoute)

    @router.post("/echo")
    async def echo(body: Body) -> dict[str, Any]:
        return {"items": len(body.items), "first": body.items[0]}

    app = FastAPI()
    app.include_router(router)
    app.add_middleware(TextCheckMiddleware, max_depth=64)
    return app


@pytest.fixture
def stdlib_parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every text the stdlib parser gets (read before the test client parses the answer)."""
    import starlette.requests

    seen: list[bytes] = []
    original = starlette.requests.json.loads

    def counting(body: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(body)
        return original(body, *args, **kwargs)

    monkeypatch.setattr(starlette.requests.json, "loads", counting)
    return seen


async def _post(content: bytes) -> httpx.Response:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.post(
            "/echo", content=content, headers={"content-type": "application/json"}
        )


async def test_a_long_body_is_parsed_once(stdlib_parses: list[bytes]) -> None:
    items = ",".join(f'{{"n": {i}, "text": "x"}}' for i in range(200))  # 200 brackets
    response = await _post(b'{"items": [' + items.encode() + b"]}")
    assert stdlib_parses == []  # the route took what the depth check parsed
    assert response.status_code == 200, response.text
    assert response.json() == {"items": 200, "first": {"n": 0, "text": "x"}}


async def test_what_orjson_refuses_is_parsed_by_the_stdlib(stdlib_parses: list[bytes]) -> None:
    items = ",".join("[NaN]" for _ in range(100))  # NaN: the stdlib's JSON, not orjson's
    response = await _post(b'{"items": [' + items.encode() + b"]}")
    assert len(stdlib_parses) == 1
    assert response.status_code == 200, response.text
    assert response.json()["items"] == 100


async def test_a_short_body_is_parsed_once_too(stdlib_parses: list[bytes]) -> None:
    response = await _post(b'{"items": [1, 2]}')
    assert stdlib_parses == []
    assert response.status_code == 200, response.text
    assert response.json() == {"items": 2, "first": 1}
