"""Run the fake upstream in a subprocess and drive its control API from tests or benchmarks."""

from __future__ import annotations

import asyncio
import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
PORT_PREFIX = "FAKE_UPSTREAM_PORT="


class FakeUpstreamError(RuntimeError):
    pass


class FakeUpstream:
    """`with FakeUpstream() as fake:` ... `fake.base_url` is "http://127.0.0.1:PORT/v1".

    Control API, sync and async (prefixed `a`): requests(), reset(), script(model, responses),
    faults(model, faults), stats().
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: float = 0.0,
        startup_timeout: float = 20.0,
        log_level: str = "warning",
        token_scale: float = 1.0,
    ) -> None:
        """``token_scale``: the provider's prompt tokens per contextgate token (1.2 or 1.35
        stand in for Claude's tokenizer against tiktoken; FAKE_UPSTREAM_TOKEN_SCALE)."""
        self.token_scale = token_scale
        self.host, self.latency_ms, self.startup_timeout = host, latency_ms, startup_timeout
        self.log_level = log_level
        self._requested_port = port
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._client: httpx.Client | None = None

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise FakeUpstreamError("FakeUpstream is not started")
        return self._port

    @property
    def url(self) -> str:
        """Root URL, e.g. http://127.0.0.1:PORT (the control API lives under /_fake/)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client or litellm's api_base wants: http://127.0.0.1:PORT/v1."""
        return f"{self.url}/v1"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> FakeUpstream:
        if self._proc is not None:
            raise FakeUpstreamError("FakeUpstream already started")
        cmd = [sys.executable, "-m", "tests.fake_upstream", "--host", self.host]
        cmd += ["--port", str(self._requested_port), "--latency-ms", str(self.latency_ms)]
        cmd += ["--log-level", self.log_level]
        env = {
            **os.environ,
            "FAKE_UPSTREAM_TOKEN_SCALE": str(self.token_scale),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
            ),
        }
        self._stderr = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=self._stderr
        )
        try:
            deadline = time.monotonic() + self.startup_timeout
            self._port = self._read_port(deadline)
            self._client = httpx.Client(base_url=self.url, timeout=10.0, trust_env=False)
            self._wait_healthy(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _read_port(self, deadline: float) -> int:
        assert self._proc is not None
        assert self._proc.stdout is not None
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buf:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._fail("did not print its port in time")
                if sel.select(remaining):
                    chunk = os.read(self._proc.stdout.fileno(), 4096)
                    if not chunk:
                        self._fail("exited before printing its port")
                    buf += chunk
        line = buf.split(b"\n", 1)[0].decode().strip()
        if not line.startswith(PORT_PREFIX):
            self._fail(f"printed {line!r} instead of {PORT_PREFIX}<port>")
        return int(line[len(PORT_PREFIX) :])

    def _wait_healthy(self, deadline: float) -> None:
        assert self._client is not None
        while True:
            try:
                if self._client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or not self.running:
                self._fail("did not answer /health")
            time.sleep(0.02)

    def _fail(self, what: str) -> None:
        err = b""
        if self._stderr is not None:
            self._stderr.seek(0)
            err = self._stderr.read()[-4000:]
        raise FakeUpstreamError(f"fake upstream {what}; stderr:\n{err.decode(errors='replace')}")

    def stop(self, timeout: float = 5.0) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._port = None

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> FakeUpstream:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # --- control API (sync) ------------------------------------------------------------------

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        if self._client is None:
            raise FakeUpstreamError("FakeUpstream is not started")
        response = self._client.request(method, path, json=payload)
        response.raise_for_status()
        return response.json()

    def requests(self) -> list[dict[str, Any]]:
        """Every chat/embeddings call so far: {"method", "path", "headers", "body"}, in order."""
        result: list[dict[str, Any]] = self._call("GET", "/_fake/requests")
        return result

    def reset(self) -> None:
        """Forget recorded requests, queued scripts and faults, counters and stats."""
        self._call("POST", "/_fake/reset")

    def script(self, model: str, responses: list[str | dict[str, Any]]) -> None:
        """Queue answers for `model`: a string, or {"content", "delay_ms", "tool_calls"}."""
        self._call("POST", "/_fake/script", {"model": model, "responses": responses})

    def faults(self, model: str, faults: list[dict[str, Any]]) -> None:
        """Queue faults for `model` ("*" = any), one consumed per call."""
        self._call("POST", "/_fake/faults", {"model": model, "faults": faults})

    def stats(self) -> dict[str, int]:
        """{"calls", "disconnects", "active_streams"}."""
        result: dict[str, int] = self._call("GET", "/_fake/stats")
        return result

    # --- control API (async) -----------------------------------------------------------------

    async def _acall(self, method: str, path: str, payload: Any = None) -> Any:
        async with httpx.AsyncClient(base_url=self.url, timeout=10.0, trust_env=False) as client:
            response = await client.request(method, path, json=payload)
            response.raise_for_status()
            return response.json()

    async def arequests(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._acall("GET", "/_fake/requests")
        return result

    async def areset(self) -> None:
        await self._acall("POST", "/_fake/reset")

    async def ascript(self, model: str, responses: list[str | dict[str, Any]]) -> None:
        await self._acall("POST", "/_fake/script", {"model": model, "responses": responses})

    async def afaults(self, model: str, faults: list[dict[str, Any]]) -> None:
        await self._acall("POST", "/_fake/faults", {"model": model, "faults": faults})

    async def astats(self) -> dict[str, int]:
        result: dict[str, int] = await self._acall("GET", "/_fake/stats")
        return result
