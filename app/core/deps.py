"""The storage every router of the lower packages reads, as an ``Annotated`` alias.

The application's state (``app.state.AppState``) sits above the packages; a router below it
names only what it uses: ``StorageDep`` (the settings and the database). The caller
(``CallerDep``) and the key service (``KeyServiceDep``) come from app/keys/auth.py.
"""

from __future__ import annotations

from typing import Annotated, Protocol

from fastapi import Depends, Request

from app.core.database import Database
from app.core.settings import Settings

__all__ = ["Storage", "StorageDep", "get_storage"]


class Storage(Protocol):
    """The settings and the database (``AppState`` has both)."""

    settings: Settings
    database: Database


async def get_storage(request: Request) -> Storage:
    """FastAPI dependency. ``async`` on purpose: FastAPI runs a plain ``def`` dependency on
    its thread pool, a thread hand-off on every request for an attribute lookup."""
    storage: Storage = request.app.state.contextgate
    return storage


StorageDep = Annotated[Storage, Depends(get_storage)]
