"""Run the real contextgate server as a subprocess (``contextgate serve``) for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

__all__ = ["SERVER_LOGS", "ContextgateServer", "free_port"]

REPO = Path(__file__).resolve().parents[2]
# Every server log of the session, scanned for secrets at its end (tests/plugins/log_capture.py).
SERVER_LOGS: list[Path] = []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ContextgateServer:
    """``contextgate serve`` on a free loopback port with the given CONTEXTGATE_* settings."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        workers: int = 1,
        log_path: Path | None = None,
        startup_timeout: float = 60.0,
        unset: tuple[str, ...] = (),
    ) -> None:
        self.env = env
        self.unset = unset  # variables of this process the server must not inherit
        self.workers = workers
        self.port = free_port()
        self.log_path = log_path
        if log_path is not None:
            SERVER_LOGS.append(log_path)
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: object | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> ContextgateServer:
        env = {**os.environ, **self.env}
        for name in self.unset:
            env.pop(name, None)
        command = [
            sys.executable, "-m", "app.cli", "serve",
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers),
        ]  # fmt: skip
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._log_file = log
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True
        )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"contextgate exited with {self.process.returncode}: {self.tail()}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"contextgate did not start in {self.startup_timeout} s: {self.tail()}")

    def tail(self, lines: int = 30) -> str:
        if self.log_path and self.log_path.exists():
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def stop(self, *, kill: bool = False) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            if kill:
                process.kill()
            else:
                process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self.process = None
        if self._log_file not in (None, subprocess.DEVNULL):
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None

    def __enter__(self) -> ContextgateServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
