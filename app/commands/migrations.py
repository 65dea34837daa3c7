"""Alembic's configuration for this checkout or install (``migrate``, ``doctor``, tests), and
whether a SQLite database is already at every head, found without alembic (``serve``)."""

from __future__ import annotations

import ast
import sqlite3
from contextlib import closing
from pathlib import Path

__all__ = ["alembic_config", "script_heads", "sqlite_at_heads"]

# A checkout (or the Docker image) has alembic.ini next to app/; a wheel install has only the
# migrations/ folder beside app/ in site-packages.
ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ROOT / "migrations" / "versions"
_FIELDS = ("revision", "down_revision", "branch_labels", "depends_on")


def alembic_config(database_url: str) -> object:
    from alembic.config import Config

    # these two options are all a wheel install needs
    ini = ROOT / "alembic.ini"
    config = Config(str(ini)) if ini.is_file() else Config()
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.set_main_option("version_path_separator", "os")
    config.attributes["database_url"] = database_url
    return config


def sqlite_at_heads(database_url: str) -> bool:
    """Whether ``alembic upgrade heads`` has nothing to do on this SQLite database: its
    alembic_version rows are exactly the scripts' heads. Lets ``serve`` skip alembic (and the
    ~8-10 MB it and its scripts take) on a restart. False whenever unsure (not a SQLite file, a
    script this reading does not understand, anything unreadable): alembic then decides."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.query or url.database in (None, "", ":memory:"):
        return False
    path = Path(str(url.database))
    heads = script_heads()
    if not heads or not path.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True)) as db:
            stored = {row[0] for row in db.execute("SELECT version_num FROM alembic_version")}
    except sqlite3.Error:
        return False
    return stored == heads


def script_heads(versions: Path = VERSIONS) -> set[str]:
    """The revisions no script revises (alembic's heads), from each script's literal
    ``revision`` and ``down_revision``; empty when a script has no literal revision, or branch
    labels or dependencies (whose heads only alembic works out)."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for script in sorted(versions.glob("*.py")):
        fields = _literal_fields(script)
        revision = fields.get("revision") if fields is not None else None
        if fields is None or not isinstance(revision, str):
            return set()
        if fields.get("branch_labels") or fields.get("depends_on"):
            return set()
        down = fields.get("down_revision")
        if isinstance(down, str):
            revised.add(down)
        elif isinstance(down, tuple | list):
            revised.update(str(d) for d in down)
        elif down is not None:
            return set()
        revisions.add(revision)
    return revisions - revised


def _literal_fields(script: Path) -> dict[str, object] | None:
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    fields: dict[str, object] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and target.id in _FIELDS and value is not None:
            try:
                fields[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError):
                return None
    return fields
