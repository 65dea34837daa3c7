"""The server's logs are formatted and written by a thread of their own (app/core/logging.py):
each line still carries the request id of the request that logged it, is redacted, and every
queued line is written before the process exits. Run in a child process: configuring logging
replaces the root logger's handlers, which the test session's own capture needs."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.proxy import REPO

CHILD = r"""
import asyncio, logging, threading
from app.core.logging import configure_logging, register_secret, request_id_var

configure_logging("INFO")
register_secret("sk-thread-secret-81d2")
log = logging.getLogger("contextgate.test")

async def request(n: int) -> None:
    request_id_var.set(f"req_{n}")
    await asyncio.sleep(0)
    log.info("turn %s with sk-thread-secret-81d2", n, extra={"turn": n})

async def main() -> None:
    await asyncio.gather(*(request(n) for n in range(200)))

asyncio.run(main())
print("threads", sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()))
"""


def test_lines_keep_their_request_id_are_redacted_and_all_written_at_exit() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    turns = [line for line in lines if line.get("logger") == "contextgate.test"]
    assert len(turns) == 200  # the process exited right after logging: none lost
    assert all(line["request_id"] == f"req_{line['turn']}" for line in turns)
    assert all("sk-thread-secret" not in line["msg"] for line in turns)
    assert all(line["msg"].startswith(f"turn {line['turn']} with ") for line in turns)
    assert "log-writer" in done.stdout  # the writer's thread wrote them
