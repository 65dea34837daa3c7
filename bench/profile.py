"""Profile contextgate's hot path in-process with pyinstrument:

    python -m bench.profile [--requests 300] [--stream] [--html out.html]
    python -m bench.profile --agent [--door chat|messages|responses] [--requests 12]

Starts the fake upstream, builds the app on a fresh SQLite file, continues one conversation
for ``--requests`` small turns through the ASGI app, and prints pyinstrument's call tree.
``--agent``: an agent-sized tool loop instead (bench/agent_prompt.py: ~150k tokens of 50 tool
results resent whole on each call, one more tool step per call; a 200k-token window), timed
per call after two warm-up calls, with the server's CPU per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

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


async def drive_agent(
    base_url: str, db_url: str, door: str, requests: int, html: str | None
) -> None:
    from pyinstrument import Profiler

    from bench.agent_prompt import AgentTask, answer_of

    paths = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}
    task = AgentTask(run="profile")
    async with inprocess_app(base_url, db_url, default_context_window=200_000) as (_, client):

        async def call() -> None:
            body = orjson.dumps(task.body(door))
            response = await client.post(
                paths[door], content=body, headers={"content-type": "application/json"}
            )
            response.raise_for_status()
            answer = answer_of(door, response.json())
            assert answer.get("tool_calls"), answer
            task.answered(answer)

        for _ in range(2):  # the first call stores the history; the second continues it
            await call()
        await asyncio.sleep(1.0)  # after-answer work of the first call
        profiler = Profiler(async_mode="enabled", interval=0.0005)
        walls: list[float] = []
        cpu = time.process_time()
        profiler.start()
        for _ in range(requests):
            started = time.perf_counter()
            await call()
            walls.append((time.perf_counter() - started) * 1000)
        profiler.stop()
        cpu_ms = (time.process_time() - cpu) * 1000 / requests
    print(
        f"{door}: {requests} agent calls of ~{len(orjson.dumps(task.body(door))) // 1024} KiB, "
        f"wall p50 {statistics.median(walls):.1f} ms, process CPU {cpu_ms:.1f} ms per call "
        "(fake upstream in its own process)"
    )
    if html:
        Path(html).write_text(profiler.output_html())
    print(profiler.output_text(unicode=False, color=False, show_all=args_show_all))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--html")
    parser.add_argument("--all", action="store_true", help="show library frames too")
    parser.add_argument("--agent", action="store_true", help="agent-sized tool loop")
    parser.add_argument("--door", choices=("chat", "messages", "responses"), default="chat")
    args = parser.parse_args(argv)
    global args_show_all
    args_show_all = args.all
    from tests.fake_upstream import FakeUpstream

    with FakeUpstream() as fake, tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite+aiosqlite:///{tmp}/profile.db"
        if args.agent:
            asyncio.run(drive_agent(fake.base_url, db_url, args.door, args.requests, args.html))
        else:
            asyncio.run(drive(fake.base_url, db_url, args.requests, args.stream, args.html))
    return 0


if __name__ == "__main__":
    sys.exit(main())
