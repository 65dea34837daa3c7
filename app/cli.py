"""The ``contextgate`` command: serve, migrate (and more as the domains grow)."""

from __future__ import annotations

import gc
import os
import sys

# Start-up builds ~1M objects that live as long as the process (modules, mappers, schemas);
# the collector walking them again and again while they are imported cost ~0.1 s of every
# start. ``contextgate serve`` keeps it off until the app has started, frozen what start-up
# built and turned it back on (app/main.py). Only then: importing this module does not.
#
# The server also never uses some modules its dependencies import whenever they are installed:
# httpcore imports trio (the server runs on asyncio: ~0.2 s of start-up) and h2 (HTTP/2, which
# nothing here asks for), httpx its command-line client (httpx._main: rich's progress and
# syntax views, pygments; ~4 MiB). A None entry in sys.modules makes their import fail, and
# both libraries fall back to a stub that raises only if the feature is used. FastAPI imports
# pydantic.v1 (~0.1 s of start-up) at its first route only to check that no model is a v1
# one, and treats a failed import as "none is": nothing here uses pydantic.v1. Here, before
# anything imports them, so that the workers uvicorn spawns (which run this module again, as
# __mp_main__, with the same arguments) keep them out too. LITELLM_HTTP2 asks litellm's
# clients for HTTP/2: then h2 stays importable.
SERVE_UNUSED_MODULES = ("trio", "h2", "httpx._main", "pydantic.v1")

if sys.argv[1:2] == ["serve"]:
    gc.disable()
    for _unused in SERVE_UNUSED_MODULES:
        if _unused != "h2" or not os.environ.get("LITELLM_HTTP2"):
            sys.modules.setdefault(_unused, None)  # type: ignore[arg-type]

import importlib
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from app.commands.conversations import conversations_app
from app.commands.doctor import doctor
from app.commands.keys import keys_app
from app.commands.migrations import alembic_config, create_sqlite_at_heads, sqlite_at_heads
from app.core.settings import Settings, SettingsError, load_settings

app = typer.Typer(
    name="contextgate",
    help="OpenAI-compatible proxy with conversation memory and context management.",
    no_args_is_help=True,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("contextgate")
        except PackageNotFoundError:  # run from a checkout that was never installed
            installed = "(not installed)"
        typer.echo(f"contextgate {installed}")
        raise typer.Exit()


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """OpenAI-compatible proxy with conversation memory and context management."""


app.add_typer(keys_app, name="keys")
app.add_typer(conversations_app, name="conversations")
app.command()(doctor)


def _settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        typer.echo(f"contextgate: {exc}", err=True)
        raise typer.Exit(2) from None


def run_migrations(database_url: str, revision: str = "heads") -> None:
    from alembic import command

    command.upgrade(alembic_config(database_url), revision)  # type: ignore[arg-type]


def _migrate_or_exit(database_url: str, revision: str = "heads") -> None:
    # Alembic's INFO chatter would bury the one line that matters when the database fails.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        run_migrations(database_url, revision)
    except Exception as exc:  # one line, not a traceback: the database is unusable
        reason = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
        typer.echo(f"contextgate: cannot migrate the database: {reason}", err=True)
        raise typer.Exit(2) from None


def _migrate_apart_or_exit(database_url: str) -> None:
    """``_migrate_or_exit`` for ``serve``, keeping alembic, mako and the migration scripts
    (~8-10 MB) out of the server, which does not use them again (issue 26): nothing to do on a
    SQLite database already at every head (a restart; ``sqlite_at_heads``); a new SQLite
    database is created at every head from the schema the migrations build
    (``create_sqlite_at_heads``: a few ms, not alembic's ~0.3 s); else the migration runs in
    a forked child on Linux, which reports a failure itself, in the same one line, and whose
    exit status is the command's. Elsewhere (fork is unsafe on macOS, absent on Windows),
    here. The child costs start-up ~0.05-0.1 s (its copy-on-write pages)."""
    _finish_migration(_start_migration(database_url))


def _start_migration(database_url: str) -> int | None:
    """The first half of ``_migrate_apart_or_exit``: the forked child's pid, or None when
    there is nothing left to wait for (at heads already, created at heads, or migrated here,
    off Linux). ``serve`` goes on starting while its child migrates: alembic running every
    migration takes ~0.25 s, the app's imports longer, and neither touches the other."""
    if sqlite_at_heads(database_url) or create_sqlite_at_heads(database_url):
        return None
    if sys.platform != "linux":
        _migrate_or_exit(database_url)
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: migrate, then leave without the parent's exit handlers
        code = 1
        try:
            _migrate_or_exit(database_url)
            code = 0
        except typer.Exit as exc:
            code = exc.exit_code
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _finish_migration(pid: int | None) -> None:
    """Wait for the migrating child (``_start_migration``); its failure is the command's."""
    if pid is None:
        return
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 0:
        raise typer.Exit(code if code > 0 else 1)


@app.command()
def migrate(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "heads",
) -> None:
    """Apply database migrations (serve also does this at start)."""
    settings = _settings_or_exit()
    _migrate_or_exit(settings.database_url, revision)
    typer.echo(f"database at {revision}")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    reload: Annotated[bool, typer.Option(help="Reload on code changes (development).")] = False,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="Answer with the built-in offline demo model (no provider, no key); "
            "its own database file unless CONTEXTGATE_DATABASE_URL is set.",
        ),
    ] = False,
) -> None:
    """Apply migrations, then serve the OpenAI-compatible API."""
    import uvicorn

    from app.core.logging import configure_logging
    from app.llm.routing import ConfigError, load_model_list

    if demo:
        _configure_demo(host, port)
    settings = _settings_or_exit()
    configure_logging(settings.log_level)
    deployments: list[str] = []
    if settings.config is not None:
        try:
            deployments = [d.model_name for d in load_model_list(settings.config)[0]]
        except ConfigError as exc:
            typer.echo(f"contextgate: invalid CONTEXTGATE_CONFIG: {exc}", err=True)
            raise typer.Exit(2) from None
    target: Any = "app.main:create_app"  # each worker builds its own
    migration = _start_migration(settings.database_url)
    try:  # while the database migrates (in a child): what the app's start needs first
        _prepare_multiprocess_metrics(workers)
        if workers > 1 or reload:  # the app starts in other processes: this one supervises
            gc.enable()
        else:
            _build_tokenizers_first(deployments)
            # one process: the app built here, from the settings read above (not read again)
            target = importlib.import_module("app.main").create_app(settings)
    finally:  # nothing is served before the database is at heads; its failure comes first
        _finish_migration(migration)
    uvicorn.run(
        target,
        factory=isinstance(target, str),
        host=host,
        port=port,
        workers=workers,
        reload=reload,
        log_level=settings.log_level.lower(),
        access_log=False,
        loop="uvloop" if sys.platform != "win32" else "asyncio",
        http="httptools",
        ws="none",  # no route takes a WebSocket: uvicorn imports no WebSocket library
        # Workers import litellm at start: on a busy host that outlasts uvicorn's default 5 s
        # ping, and the supervisor would kill and respawn them forever.
        timeout_worker_healthcheck=60,
    )


def _build_tokenizers_first(models: list[str]) -> None:
    """Build the tokenizers before the app is imported. tiktoken builds one from a dict of its
    ~100k byte sequences that lives beside the built tokenizer until dropped (~15 MB more for
    a moment, app/tokens/counter.py): built after the app's imports, on the first request,
    that moment was the server's peak memory (+18 MB); built first, the app's imports reuse
    the space the dict leaves."""
    from app.tokens.counter import warm_encodings

    warm_encodings(models, fallback=True)


def _configure_demo(host: str, port: int) -> None:
    """Point this server at its own /demo/v1 (the workers read the same environment)."""
    from app.demo.router import DEMO_PREFIX

    local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    local = f"[{local}]" if ":" in local else local
    os.environ["CONTEXTGATE_DEMO"] = "true"
    os.environ["CONTEXTGATE_UPSTREAM_BASE_URL"] = f"http://{local}:{port}{DEMO_PREFIX}"
    os.environ.pop("CONTEXTGATE_UPSTREAM_API_KEY", None)
    os.environ.pop("CONTEXTGATE_CONFIG", None)
    os.environ.setdefault("CONTEXTGATE_DATABASE_URL", "sqlite+aiosqlite:///./contextgate-demo.db")
    os.environ.setdefault("CONTEXTGATE_PLANNER_MODEL", "demo-planner")
    os.environ.setdefault("CONTEXTGATE_SUMMARIZER_MODEL", "demo-summarizer")
    no_proxy = os.environ.get("NO_PROXY", "")
    os.environ["NO_PROXY"] = ",".join(filter(None, [no_proxy, local.strip("[]")]))
    typer.echo(
        f"contextgate demo: an offline demo model answers every model name "
        f"(try model 'demo'); OpenAI base URL http://{local}:{port}/v1, inspector "
        f"http://{local}:{port}/ui, database {os.environ['CONTEXTGATE_DATABASE_URL']}",
        err=True,
    )


def _prepare_multiprocess_metrics(workers: int) -> None:
    """Workers write their samples to PROMETHEUS_MULTIPROC_DIR; /metrics sums them.

    Set it to keep the files somewhere chosen (it is emptied at start); unset with several
    workers, a fresh temporary directory is used. It must be set before any worker imports
    prometheus_client.
    """
    import shutil
    import tempfile

    from app.core.metrics import MULTIPROC_ENV

    chosen = os.environ.get(MULTIPROC_ENV)
    if not chosen and workers <= 1:
        return
    if chosen:
        path = Path(chosen)
        if path.is_dir():
            for child in path.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        path.mkdir(parents=True, exist_ok=True)
    else:
        os.environ[MULTIPROC_ENV] = tempfile.mkdtemp(prefix="contextgate-metrics-")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
