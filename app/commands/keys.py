"""``contextgate keys create|list|revoke``: virtual keys, straight in the database.

The same hashing as ``POST /v1/keys``: it needs ``CONTEXTGATE_MASTER_KEY`` (its pepper), so run
it with the server's environment.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from pydantic import ValidationError

from app.commands.common import console, run_with_database, settings_or_exit, titled_table
from app.core.errors import NotFound
from app.core.settings import Settings
from app.core.timestamps import as_utc
from app.keys.schemas import KeyCreate, KeyCreated, KeyInfo
from app.keys.service import KeyService

__all__ = ["keys_app"]

keys_app = typer.Typer(help="Virtual keys: each one is a tenant of its own.", no_args_is_help=True)


def _master_key(settings: Settings) -> str:
    if settings.master_key is None:
        typer.echo(
            "contextgate: keys need CONTEXTGATE_MASTER_KEY (keys are hashed with it and only "
            "checked when it is set); run with the server's environment",
            err=True,
        )
        raise typer.Exit(2)
    return settings.master_key.get_secret_value()


def _expiry(expires_at: datetime | None) -> str:
    if expires_at is None:
        return "never"
    moment = as_utc(expires_at)
    text = moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{text} (expired)" if moment <= datetime.now(UTC) else text


def _limit(value: float | int | None, unit: str = "") -> str:
    return "—" if value is None else f"{unit}{value}"


@keys_app.command("create")
def create_key(
    name: Annotated[str, typer.Argument(help="What the key is for (shown in lists).")],
    max_budget: Annotated[
        float | None, typer.Option(min=0, help="Budget in USD; past it requests get 429.")
    ] = None,
    rpm_limit: Annotated[int | None, typer.Option(min=1, help="Requests per minute.")] = None,
    expires_at: Annotated[
        str | None,
        typer.Option(
            help="When the key stops working: ISO-8601 with a zone, e.g. 2027-01-01T00:00Z."
        ),
    ] = None,
) -> None:
    """Issue a key. It is printed once and stored only hashed."""
    settings = settings_or_exit()
    master = _master_key(settings)
    try:
        body = KeyCreate(
            name=name, max_budget=max_budget, rpm_limit=rpm_limit, expires_at=expires_at
        )
    except ValidationError as exc:
        typer.echo(f"contextgate: {exc.errors()[0]['msg']}", err=True)
        raise typer.Exit(2) from None
    created: KeyCreated = run_with_database(
        settings, lambda db: KeyService(db, master).create(body)
    )
    out = console()
    out.print(f"created {created.id} ({created.name})", markup=False)
    out.print(f"key: {created.key}", markup=False, soft_wrap=True)
    out.print("store it now: it is not shown again", style="yellow")


@keys_app.command("list")
def list_keys() -> None:
    """Keys not revoked, with their limits, what they spent and expiry (expired ones marked)."""
    settings = settings_or_exit()
    master = _master_key(settings)
    keys: list[KeyInfo] = run_with_database(settings, lambda db: KeyService(db, master).list())
    out = console()
    if not keys:
        out.print("no keys yet: contextgate keys create NAME")
        return
    table = titled_table(f"keys ({len(keys)})")
    for column in ("id", "name", "prefix", "budget", "spent", "rpm", "created", "expires"):
        table.add_column(column, no_wrap=column in ("id", "prefix", "created", "expires"))
    for key in keys:
        table.add_row(
            key.id,
            key.name,
            key.key_prefix,
            _limit(key.max_budget, "$"),
            f"${key.spend:.4f}",
            _limit(key.rpm_limit),
            key.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            _expiry(key.expires_at),
        )
    out.print(table)


@keys_app.command("revoke")
def revoke_key(key_id: Annotated[str, typer.Argument(help="key_… id.")]) -> None:
    """Revoke a key: it stops working at once; its data stays stored."""
    settings = settings_or_exit()
    master = _master_key(settings)
    try:
        run_with_database(settings, lambda db: KeyService(db, master).revoke(key_id))
    except NotFound as exc:
        typer.echo(f"contextgate: {exc.message}", err=True)
        raise typer.Exit(1) from None
    console().print(f"revoked {key_id}", markup=False)
