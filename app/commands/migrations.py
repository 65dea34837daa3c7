"""Alembic's configuration for this checkout or install (``migrate``, ``doctor``, tests)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["alembic_config"]


def alembic_config(database_url: str) -> object:
    from alembic.config import Config

    # A checkout (or the Docker image) has alembic.ini next to app/; a wheel install has only
    # the migrations/ folder beside app/ in site-packages, and these two options are all it needs.
    root = Path(__file__).resolve().parents[2]
    ini = root / "alembic.ini"
    config = Config(str(ini)) if ini.is_file() else Config()
    config.set_main_option("script_location", str(root / "migrations"))
    config.set_main_option("version_path_separator", "os")
    config.attributes["database_url"] = database_url
    return config
