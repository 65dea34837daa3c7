"""The layering ARCHITECTURE.md promises, checked on the source: doors are adapters that never
import each other; the engine packages know no HTTP router and no repository."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
DOORS = ("app.chat", "app.responses", "app.messages")
ENGINES = ("app.context", "app.llm", "app.summary_cache")


def imports_of(package: str) -> dict[str, set[str]]:
    """Every module a package's files import (absolute names), by file."""
    found: dict[str, set[str]] = {}
    folder = APP / package.removeprefix("app.").replace(".", "/")
    for path in sorted(folder.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(APP.parent))] = names
    return found


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("door", DOORS)
def test_a_door_never_imports_another_door(door: str) -> None:
    others = [other for other in DOORS if other != door]
    offending = {
        path: sorted(n for n in names if any(under(n, other) for other in others))
        for path, names in imports_of(door).items()
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_the_shared_pipeline_imports_no_door() -> None:
    offending = {
        path: sorted(n for n in names if any(under(n, door) for door in DOORS))
        for path, names in imports_of("app.turns").items()
    }
    assert {path: names for path, names in offending.items() if names} == {}


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_import_no_router_and_no_repository(engine: str) -> None:
    offending = {
        path: sorted(n for n in names if n.endswith((".router", ".repository")))
        for path, names in imports_of(engine).items()
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_tenant_filters_are_written_once() -> None:
    """No query compares a ``tenant_id`` column by hand: every tenant filter comes from
    app/db/repository.py (``TenantScope.tenant_clause``, ``scoped``), so none can be forgotten
    or written differently."""
    offending = []
    for path in sorted(APP.rglob("*.py")):
        if path == APP / "db" / "repository.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare) or not isinstance(node.left, ast.Attribute):
                continue
            column = node.left
            if column.attr == "tenant_id" and isinstance(column.value, ast.Name):
                if column.value.id[:1].isupper():  # Model.tenant_id == …: a column, not a value
                    offending.append(f"{path.relative_to(APP.parent)}:{node.lineno}")
    assert offending == []
