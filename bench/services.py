"""The processes a benchmark run needs: the fake upstream, contextgate, LiteLLM proxy.

Everything listens on 127.0.0.1; everything is stopped by ``stop()`` (context managers).
LiteLLM proxy is installed once into ``bench/.work/litellm-venv`` from the package registry.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from tests.support.proxy import free_port

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / ".work"
LITELLM_VENV = WORK / "litellm-venv"
LITELLM_SPEC = "litellm[proxy]==1.106.2"
MODEL = "bench-model"
ANTHROPIC_MODEL = "bench-anthropic"  # LiteLLM proxy's /v1/messages (see LiteLLMProxy)


# --------------------------------------------------------------------------- memory


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def _status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(root: int) -> float:
    """User + system CPU time of a process tree so far (from /proc, clock ticks)."""
    ticks = 0
    for pid in tree_pids(root):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_mib(root: int) -> float:
    return sum(_status_kib(pid, "VmRSS") for pid in tree_pids(root)) / 1024


def hwm_mib(root: int) -> float:
    """Peak RSS (VmHWM) summed over the process tree."""
    return sum(_status_kib(pid, "VmHWM") for pid in tree_pids(root)) / 1024


class RssSampler:
    """Samples the RSS of a process tree every 50 ms; ``peak`` is the highest sum seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            self._stop.wait(0.05)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, hwm_mib(self.pid) if len(tree_pids(self.pid)) == 1 else 0.0)


# --------------------------------------------------------------------------- servers


class Service:
    """A server process on a free loopback port; ``ready_s`` is spawn-to-first-answer time."""

    name = "service"

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.log_path = log_dir / f"{self.name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_s = float("nan")
        self._log: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self, timeout: float = 120.0) -> Service:
        self._log = open(self.log_path, "ab")  # noqa: SIM115
        started = time.perf_counter()
        self.process = subprocess.Popen(
            self.command(),
            cwd=REPO,
            env=self.env(),
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,
        )
        body = {"model": MODEL, "messages": [{"role": "user", "content": "ready?"}]}
        deadline = started + timeout
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            while time.perf_counter() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited: {self.tail()}")
                try:
                    response = client.post(f"{self.base_url}/chat/completions", json=body)
                    if response.status_code == 200:
                        self.ready_s = time.perf_counter() - started
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"{self.name} not ready in {timeout} s: {self.tail()}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=5)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Service:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class Contextgate(Service):
    name = "contextgate"

    def __init__(
        self,
        log_dir: Path,
        upstream_base_url: str,
        database_url: str,
        *,
        workers: int = 1,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.workers = workers
        self.name = f"contextgate-w{workers}"
        super().__init__(log_dir)
        self.upstream_base_url = upstream_base_url
        self.database_url = database_url
        self.extra_env = extra_env or {}

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1",
            "--port", str(self.port), "--workers", str(self.workers),
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "CONTEXTGATE_DATABASE_URL": self.database_url,
            "CONTEXTGATE_UPSTREAM_BASE_URL": self.upstream_base_url,
            "CONTEXTGATE_UPSTREAM_API_KEY": "sk-bench",
            "CONTEXTGATE_MAX_RETRIES": "0",
            **self.extra_env,
        }


def ensure_litellm(log: Any = None) -> Path:
    """LiteLLM proxy in a throwaway venv (installed from the package registry once)."""
    executable = LITELLM_VENV / "bin" / "litellm"
    if executable.exists():
        return executable
    WORK.mkdir(parents=True, exist_ok=True)
    print(f"installing {LITELLM_SPEC} into {LITELLM_VENV} (once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
    subprocess.run(
        [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", LITELLM_SPEC],
        check=True,
        stdout=log,
        stderr=log,
    )
    return executable


class LiteLLMProxy(Service):
    name = "litellm-proxy"

    def __init__(self, log_dir: Path, upstream_base_url: str) -> None:
        super().__init__(log_dir)
        self.config = log_dir / "litellm-config.yaml"
        self.config.write_text(
            "model_list:\n"
            f"  - model_name: {MODEL}\n"
            "    litellm_params:\n"
            f"      model: openai/{MODEL}\n"
            f"      api_base: {upstream_base_url}\n"
            "      api_key: sk-bench\n"
            # /v1/messages: LiteLLM 1.106 sends an openai/ model's Messages calls to the
            # upstream's Responses API, which the fake (as many OpenAI-compatible servers)
            # does not serve; the agent scenario asks this Anthropic deployment there.
            f"  - model_name: {ANTHROPIC_MODEL}\n"
            "    litellm_params:\n"
            f"      model: anthropic/{MODEL}\n"
            f"      api_base: {upstream_base_url.removesuffix('/v1')}\n"
            "      api_key: sk-bench\n"
        )

    def command(self) -> list[str]:
        return [
            str(ensure_litellm()), "--config", str(self.config), "--host", "127.0.0.1",
            "--port", str(self.port), "--num_workers", "1",
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("CONTEXTGATE_", "DATABASE_URL", "LITELLM_MASTER_KEY"))
        }
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        # 1.106 refuses to start without a master key unless told this is on purpose.
        env["LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY"] = "true"
        env.pop("VIRTUAL_ENV", None)
        return env
