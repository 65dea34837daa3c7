"""A recording pass-through proxy: what an agent sent, before contextgate changes anything.

``with Recorder(target) as recorder:`` point the agent at ``recorder.url``; every request is
forwarded to ``target`` as it is (the answer streamed back as it comes) and its JSON body kept
in ``recorder.bodies``. For agents whose provider the fake upstream cannot play (Codex speaks
only the Responses API): their own requests are the direct bill.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.support.proxy import free_port

__all__ = ["Recorder"]

_HOP = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}


class Recorder:
    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.port = free_port()
        self.bodies: list[tuple[str, Any]] = []  # (path, JSON body)
        self._client = httpx.AsyncClient(timeout=600.0, trust_env=False)
        app = Starlette(routes=[Route("/{path:path}", self._forward, methods=["GET", "POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _forward(self, request: Request) -> StreamingResponse:
        raw = await request.body()
        path = request.url.path
        if raw:
            try:
                self.bodies.append((path, orjson.loads(raw)))
            except orjson.JSONDecodeError:
                self.bodies.append((path, None))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        upstream = await self._client.send(
            self._client.build_request(
                request.method, self.target + path, content=raw, headers=headers,
                params=request.query_params,
            ),
            stream=True,
        )  # fmt: skip

        async def body() -> AsyncIterator[bytes]:
            async for chunk in upstream.aiter_raw():
                yield chunk

        kept = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
        kept.pop("content-encoding", None)
        return StreamingResponse(
            body(), upstream.status_code, headers=kept, background=BackgroundTask(upstream.aclose)
        )

    def __enter__(self) -> Recorder:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the recorder did not start")
            time.sleep(0.05)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
