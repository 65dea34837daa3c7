"""What every operator command needs: settings, a console, a database for one async run.

rich is imported by the command that prints: ``contextgate serve`` imports these modules too,
and does without its ~2 MB (issue 26)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import typer

from app.core.database import Database, create_database
from app.core.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["console", "run_with_database", "settings_or_exit", "titled_table"]

T = TypeVar("T")


def console() -> Console:
    """A console built per command, so COLUMNS and NO_COLOR of the moment apply."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def titled_table(title: str) -> Table:
    from rich.table import Table

    return Table(title=title)


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        typer.echo(f"contextgate: {exc}", err=True)
        raise typer.Exit(2) from None


def run_with_database(settings: Settings, work: Callable[[Database], Awaitable[T]]) -> T:
    """Open the configured database, run ``work`` on it, close it."""

    async def main() -> T:
        database = create_database(
            settings.database_url,
            pool_size=settings.db_pool_size,
            busy_timeout_ms=settings.sqlite_busy_timeout_ms,
        )
        try:
            return await work(database)
        finally:
            await database.dispose()

    return asyncio.run(main())
