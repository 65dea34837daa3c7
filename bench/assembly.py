"""Context assembly time against the number of stored messages (issue 2's history curve).

For each size N a conversation of N stored messages (~100 tokens each, so that even 100 of
them exceed the default 8k window and the loaded tail is the same size for every N) is
seeded straight into the database, then ``prepare()`` (resolve, count, load the window,
memory/context engine, assemble) is timed for a request that continues it by id with one
short user message, and so is the whole request through the ASGI app (upstream included).
Every SQL statement is counted too: the count must not depend on N.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import app  # noqa: F401  (offline defaults before litellm is imported)

FILLER = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly "
    "numbers, the weather report, the shipping manifest and the list of open questions about "
    "the migration plan, which is due next week and still needs two more approvals. "
) * 2


async def seed(state: Any, tenant_id: str, count: int) -> str:
    """A conversation of ``count`` stored messages (system prompt first), stored in one go."""
    from app.conversations.messages import ConversationMessage
    from app.conversations.service import conversation_service
    from app.db.models import new_id

    conversation_id = new_id("conv")
    messages: list[ConversationMessage] = []
    for index in range(count):
        role = "system" if index == 0 else ("user" if index % 2 else "assistant")
        content = "You are helpful." if index == 0 else f"message {index}. {FILLER}"
        data = {"role": role, "content": content}
        messages.append(
            ConversationMessage(**data, token_count=state.tokens.count_message(data, "gpt-4o"))
        )
    async with state.database.writing() as session:
        for start in range(0, count, 2000):
            await conversation_service.append(
                session,
                tenant_id,
                conversation_id,
                messages[start : start + 2000],
                model="bench-model",
            )
    return conversation_id


class StatementCounter:
    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.count = 0
        self._engine = engine.sync_engine
        event.listen(self._engine, "before_cursor_execute", self._on_execute)

    def _on_execute(self, *_args: Any) -> None:
        self.count += 1

    def close(self) -> None:
        from sqlalchemy import event

        event.remove(self._engine, "before_cursor_execute", self._on_execute)


async def measure(
    upstream_base_url: str,
    database_url: str,
    sizes: list[int],
    repeats: int,
    *,
    memory: bool = False,
) -> list[dict[str, Any]]:
    import asyncio

    import httpx

    from app.chat.models import ChatContext
    from app.chat.pipeline import new_request_id, prepare
    from app.cli import run_migrations
    from app.core.settings import Settings
    from app.keys.auth import Caller
    from app.main import create_app
    from app.protocol.chat import ChatCompletionRequest

    await asyncio.to_thread(run_migrations, database_url)
    settings = Settings(
        database_url=database_url,
        upstream_base_url=upstream_base_url,
        upstream_api_key="sk-bench",  # type: ignore[arg-type]
        max_retries=0,
        log_level="WARNING",
        _env_file=None,  # type: ignore[call-arg]
    )
    application = create_app(settings)
    rows: list[dict[str, Any]] = []
    async with application.router.lifespan_context(application):
        state = application.state.contextgate
        caller = Caller(tenant_id="default")
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://cg/v1") as client:
            for size in sizes:
                conversation_id = await seed(state, caller.tenant_id, size)
                prepare_ms: list[float] = []
                request_ms: list[float] = []
                statements: list[int] = []
                for index in range(repeats + 2):
                    body = {
                        "model": "bench-model",
                        "conversation_id": conversation_id,
                        "messages": [{"role": "user", "content": f"next question {index}"}],
                        "context": {"memory": memory},
                    }
                    request = ChatCompletionRequest.model_validate(body)
                    context = ChatContext(request, caller, new_request_id(), time.perf_counter())
                    started = time.perf_counter()
                    prepared = await prepare(state, context)
                    elapsed = (time.perf_counter() - started) * 1000
                    counter = StatementCounter(state.database.engine)
                    started = time.perf_counter()
                    response = await client.post("/chat/completions", json=body)
                    total = (time.perf_counter() - started) * 1000
                    counter.close()
                    response.raise_for_status()
                    if index >= 2:  # the first two warm caches up
                        prepare_ms.append(elapsed)
                        request_ms.append(total)
                        statements.append(counter.count)
                rows.append(
                    {
                        "stored": size,
                        "prepare_ms": statistics.median(prepare_ms),
                        "request_ms": statistics.median(request_ms),
                        "sent_messages": len(prepared.messages),
                        "statements": max(statements),
                    }
                )
    return rows


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [row["stored"] for row in rows]
    figure, axis = plt.subplots(figsize=(7, 4.2), dpi=110)
    axis.plot(sizes, [row["prepare_ms"] for row in rows], "o-", label="context assembly (prepare)")
    axis.plot(sizes, [row["request_ms"] for row in rows], "s--", label="whole request (in-process)")
    axis.set_xscale("log")
    axis.set_xlabel("stored messages in the conversation")
    axis.set_ylabel("median time (ms)")
    axis.set_ylim(bottom=0)
    axis.set_title(title, fontsize=10)
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
