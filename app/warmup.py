"""Work done once at start on worker threads, so that the first requests do not pay for it:
the tokenizers of the models a ``model_list`` serves (tiktoken builds o200k_base in ~0.4 s)
and the embedded embedding model when it is slow to load (``load_at_start``: WordLlama's
~0.25 s; MiniLM loads in ~20-40 ms at its first use, and a server that never embeds does not
hold its ~9 MB). Readiness is not delayed; a request that comes sooner waits for what it needs
(each load is locked and done once).

Only the served models' tokenizers: one costs 45-70 MB of memory (cl100k_base, o200k_base),
too much to build for a planner or summarizer that may never be called."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from app.embedders.embedded import EmbeddedEmbedder
from app.state import AppState
from app.tokens.counter import warm_encodings

__all__ = ["start_warm_up"]

logger = logging.getLogger(__name__)


def start_warm_up(state: AppState) -> None:
    models = state.llm.router.configured_names()
    if models:
        _in_background(state, "tokenizers", lambda: warm_encodings(models))
    embedder = state.embedder
    if isinstance(embedder, EmbeddedEmbedder) and embedder.load_at_start:
        # a failure is logged; retrieval falls back to BM25 and says so in the notes
        _in_background(state, "embedded embedder", embedder.load)


def _in_background(state: AppState, what: str, work: Callable[[], object]) -> None:
    async def run() -> None:
        try:
            await asyncio.to_thread(work)
        except Exception:
            logger.exception("warm-up failed", extra={"what": what})

    task = asyncio.get_running_loop().create_task(run())
    state.background.add(task)
    task.add_done_callback(state.background.discard)
