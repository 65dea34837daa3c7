"""create_app(settings): the wiring. Long-lived parts are built in the lifespan as AppState."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

from app.attachments.router import router as attachments_router
from app.chat.router import router as chat_router
from app.conversations.claims import HeadClaims
from app.core.access_log import AccessLogMiddleware
from app.core.database import create_database
from app.core.errors import install_error_handlers
from app.core.limits import BodySizeLimitMiddleware
from app.core.middleware import RequestContextMiddleware
from app.core.openapi import install_openapi
from app.core.redact import configure_redaction
from app.core.settings import Settings, load_settings
from app.core.textcheck import TextCheckMiddleware
from app.demo.router import install_demo
from app.embedders.embedder import build_embedder
from app.embeddings.router import router as embeddings_router
from app.keys.router import router as keys_router
from app.keys.wiring import (
    build_auth_throttle,
    build_key_limits,
    build_key_service,
    install_secrets,
)
from app.llm.client import LLMClient, RetryPolicy
from app.llm.reach import HelperModels
from app.llm.routing import ModelRouter, load_model_list
from app.memories.router import router as memories_router
from app.memories.runtime import MemoryRuntime
from app.memories.save import router as conversation_save_router
from app.messages.errors import anthropic_error_response
from app.messages.router import ERROR_PREFIX as MESSAGES_PREFIX
from app.messages.router import router as messages_router
from app.responses.compaction_door import router as responses_compaction_router
from app.responses.conversations.items_router import router as conversation_items_router
from app.responses.conversations.router import router as conversations_router
from app.responses.router import router as responses_router
from app.state import AppState
from app.summary_cache.factory import build_summary_cache
from app.system.router import router as system_router
from app.tokens.calibration import TokenCalibration
from app.tokens.counter import TokenCounter
from app.ui.router import install_ui
from app.warmup import start_warm_up

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["build_state", "close_state", "create_app"]


def build_router(settings: Settings) -> ModelRouter:
    deployments, fallbacks = load_model_list(settings.config) if settings.config else ([], {})
    return ModelRouter(
        deployments,
        fallbacks=fallbacks,
        upstream_base_url=settings.upstream_base_url,
        upstream_api_key=(
            settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else None
        ),
    )


def build_state(settings: Settings) -> AppState:
    router = build_router(settings)
    configure_redaction(
        *(
            secret.get_secret_value()
            for secret in (settings.master_key, settings.upstream_api_key)
            if secret
        ),
        params=[deployment.params for deployment in router.deployments()],
    )
    database = create_database(
        settings.database_url,
        pool_size=settings.db_pool_size,
        busy_timeout_ms=settings.sqlite_busy_timeout_ms,
        background_checkpoints=True,
    )
    llm = LLMClient(
        router,
        timeout_s=settings.request_timeout_s,
        connect_timeout_s=settings.connect_timeout_s,
        first_token_timeout_s=settings.first_token_timeout_s,
        direct=settings.upstream_transport == "auto",
        retry=RetryPolicy(
            max_retries=settings.max_retries,
            backoff_s=settings.retry_backoff_s,
            max_backoff_s=settings.retry_max_backoff_s,
        ),
    )
    redis = build_redis(settings)
    keys = build_key_service(settings, database)
    helpers = HelperModels.check(settings, router)
    return AppState(
        settings=settings,
        database=database,
        llm=llm,
        tokens=TokenCounter(),
        limits=build_key_limits(settings, database, redis),
        auth_throttle=build_auth_throttle(settings, redis),
        memory=MemoryRuntime(settings, database, redis),
        continuations=HeadClaims(ttl_s=settings.request_timeout_s + 60),
        calibration=TokenCalibration(database),
        keys=keys,
        redis=redis,
        key_resolver=keys.resolve if keys is not None else None,
        summary_cache=build_summary_cache(settings),
        helpers=helpers,
        # An embedding model without a route: the embedded embedder instead (helpers says so).
        embedder=build_embedder(settings, llm, embedding_model=helpers.embedding),
    )


def build_redis(settings: Settings) -> Redis | None:
    """The Redis client the limits and the memory locks share (the summary cache keeps its
    own: its backend also runs without one)."""
    if not settings.redis_url:
        return None
    import redis.asyncio as aioredis

    client: Redis = aioredis.from_url(settings.redis_url)
    return client


async def close_state(state: AppState) -> None:
    await _drain_background(state)
    await state.calibration.close()
    if state.summary_cache is not None:
        await state.summary_cache.close()
    if state.redis is not None:
        await state.redis.aclose()
    await state.llm.aclose()
    await state.database.dispose()


async def _drain_background(state: AppState, grace_s: float = 5.0) -> None:
    """Let background work (partial answers being saved, extraction) finish, briefly; then
    cancel what is left and wait for it, so no task touches the database after it closes."""
    pending = [task for task in state.background if not task.done()]
    if not pending:
        return
    _, still_running = await asyncio.wait(pending, timeout=grace_s)
    for task in still_running:
        task.cancel()
    await asyncio.gather(*still_running, return_exceptions=True)


_frozen = False
# The collector's youngest generation is collected once this many more containers were
# allocated than freed (CPython's default: 700). A request holds a few thousand at its peak
# (history rows, messages, the prompt): at 700 the collector ran about every other request
# and promoted what was in flight, and the older generations grew with it until full
# collections walked every cache (~130 ms each on the bench machine). At 10,000, GC time per
# short request 0.55 -> 0.25 ms and the longest pause 180 -> 40 ms (bench/README.md, item 37).
# The request path makes almost no cyclic garbage: what waits longer for the collector is
# a few megabytes at most.
YOUNG_GENERATION_THRESHOLD = 10_000


def _freeze_startup_objects() -> None:
    """Move what start-up built (modules, mappers, schemas, caches) out of the collector's
    reach: it lives as long as the process, and every full collection would walk it again.
    Once per process (tests build many apps in one); no collection first (it cost 60-140 ms
    of start-up to find a few thousand objects, left frozen now); the collector, which
    ``contextgate serve`` keeps off while it starts (app/cli.py), is on from here, with a
    young generation sized for a request (``YOUNG_GENERATION_THRESHOLD``)."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)
    gc.enable()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        install_secrets(settings)
        state = build_state(settings)
        app.state.contextgate = state
        if state.helpers is not None:
            state.helpers.log_fallbacks()
        state.llm.warm_up(embeddings=settings.embedding_model is not None)
        start_warm_up(state)
        _freeze_startup_objects()
        try:
            yield
        finally:
            await close_state(state)

    app = FastAPI(
        title="contextgate",
        version="0.1.0",
        summary="OpenAI-compatible proxy with conversation memory and context management.",
        lifespan=lifespan,
    )
    envelopes = {MESSAGES_PREFIX: anthropic_error_response}  # OpenAI's everywhere else
    install_error_handlers(app, envelopes)
    # inside the size limit: bodies are bounded
    app.add_middleware(TextCheckMiddleware, max_depth=settings.max_json_depth)
    app.add_middleware(
        BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes, renderers=envelopes
    )
    app.add_middleware(AccessLogMiddleware)
    app.add_middleware(RequestContextMiddleware)
    app.include_router(chat_router)
    app.include_router(messages_router)
    app.include_router(conversations_router)
    app.include_router(conversation_items_router)
    app.include_router(memories_router)
    app.include_router(conversation_save_router)
    app.include_router(attachments_router)
    app.include_router(keys_router)
    app.include_router(embeddings_router)
    app.include_router(responses_router)
    app.include_router(responses_compaction_router)
    app.include_router(system_router)
    install_ui(app)
    if settings.demo:
        install_demo(app)
    install_openapi(app)
    return app
