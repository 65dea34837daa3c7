"""Profile contextgate's hot path in-process with pyinstrument:

    python -m bench.profile [--requests 300] [--stream] [--html out.html]

Starts the fake upstream, builds the app on a fresh SQLite file, continues one conversation
for ``--requests`` small turns through the ASGI app, and prints pyinstrument's call tree.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from bench.inprocess import inprocess_app, turn  # also: offline defaults before litellm

args_show_all = False


async def drive(base_url: str, db_url: str, requests: int, stream: bool, html: str | None) -> None:
    from pyinstrument import Profiler

    async with inprocess_app(base_url, db_url) as (_, client):
        first = (await client.post("/chat/completions", json=turn("hi"))).json()
        conversation_id = first["conversation_id"]
        for index in range(20):  # warm-up
            warm = turn(f"warm {index}", conversation_id)
            (await client.post("/chat/completions", json=warm)).raise_for_status()
        profiler = Profiler(async_mode="enabled", interval=0.0005)
        started = time.perf_counter()
        profiler.start()
        for index in range(requests):
            if index % 25 == 0:  # small conversations, as in bench.run
                conversation_id = None
            body = turn(f"hello turn {index}", conversation_id, stream=stream)
            response = await client.post("/chat/completions", json=body)
            response.raise_for_status()
            conversation_id = response.headers["x-conversation-id"]
        profiler.stop()
        elapsed = time.perf_counter() - started
    print(f"{requests} requests in {elapsed:.2f} s: {elapsed / requests * 1000:.2f} ms each")
    if html:
        Path(html).write_text(profiler.output_html())
    print(profiler.output_text(unicode=False, color=False, show_all=args_show_all))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--html")
    parser.add_argument("--all", action="store_true", help="show library frames too")
    args = parser.parse_args(argv)
    global args_show_all
    args_show_all = args.all
    from tests.fake_upstream import FakeUpstream

    with FakeUpstream() as fake, tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite+aiosqlite:///{tmp}/profile.db"
        asyncio.run(drive(fake.base_url, db_url, args.requests, args.stream, args.html))
    return 0


if __name__ == "__main__":
    sys.exit(main())
