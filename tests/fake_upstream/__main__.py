"""`python -m tests.fake_upstream --host 127.0.0.1 --port 0 [--latency-ms N]`.

Prints exactly one line, `FAKE_UPSTREAM_PORT=<port>`, on stdout once it is listening.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys

import uvicorn

from .app import create_app
from .faults import quiet_drop_logs


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


async def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task  # startup failed: surface the error
            return
        await asyncio.sleep(0.005)
    print(f"FAKE_UPSTREAM_PORT={sock.getsockname()[1]}", flush=True)
    await task


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fake_upstream", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="sleep before every answer")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)

    sock = _bind(args.host, args.port)
    config = uvicorn.Config(
        create_app(latency_ms=args.latency_ms),
        log_level=args.log_level,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    quiet_drop_logs()  # after Config(), which (re)configures uvicorn's loggers
    server = uvicorn.Server(config)
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(_serve(server, sock))
    return 0


if __name__ == "__main__":
    sys.exit(main())
