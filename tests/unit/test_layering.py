"""The layering ARCHITECTURE.md promises, checked on the source through grimp's import graph
(every import statement, ``TYPE_CHECKING`` blocks and function-level imports included):

- no module circle, no package cycle;
- the packages form the layers below, and every import points down (or sideways, within a
  layer, between packages that do not import each other back);
- doors are adapters that never import each other; the pipeline imports no door; the engine
  packages know no HTTP router and no repository; tenant filters are written once.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import grimp
import pytest

from bench.house import (
    import_graph,
    module_edges,
    package_edges,
    package_of,
    strongly_connected,
    two_package_loops,
)

APP = Path(__file__).resolve().parents[2] / "app"
DOORS = ("app.chat", "app.responses", "app.messages")
ENGINES = ("app.context", "app.llm", "app.summary_cache", "app.tokens")

# From the top: each layer imports only the layers below it (and its own packages sideways).
LAYERS: tuple[tuple[str, ...], ...] = (
    # the application: wiring, the command line, start-up work
    ("app.main", "app.cli", "app.warmup"),
    # operator surfaces: CLI commands, the inspector UI, health/models, the demo model
    ("app.commands", "app.ui", "app.system", "app.demo"),
    # the doors: translate a wire format to the pipeline and render its answer back
    ("app.chat", "app.messages", "app.responses", "app.embeddings"),
    # the turn pipeline every door shares
    ("app.turns",),
    # the application's long-lived services (AppState), built once at start-up
    ("app.state",),
    # long-term memory
    ("app.memories",),
    # compaction (summaries of old turns), message recall
    ("app.compaction", "app.recall"),
    # context management: the history fit, the prompt-cache fit, artifacts, the planner;
    # attachments (artifacts of their own) and the inspector's read models
    ("app.context", "app.attachments", "app.inspect"),
    # stored conversations and their messages
    ("app.conversations",),
    # services below the domain: virtual keys and limits, the upstream client, the summary
    # cache, token counting, the embedders
    ("app.keys", "app.llm", "app.summary_cache", "app.tokens", "app.embedders"),
    # the request shapes (the chat request every door translates to)
    ("app.protocol",),
    # the bottom: settings, errors, logging, metrics, the database engine; the models; the
    # wire's TypedDicts
    ("app", "app.core", "app.db", "app.wire"),
)


@cache
def graph() -> grimp.ImportGraph:
    return import_graph()


@cache
def modules() -> dict[str, set[str]]:
    return module_edges(graph())


def packages() -> dict[str, set[str]]:
    return package_edges(modules())


def test_no_module_imports_itself_back() -> None:
    assert strongly_connected(modules()) == []


def test_no_two_packages_import_each_other() -> None:
    assert two_package_loops(packages()) == []
    assert strongly_connected(packages()) == []


def test_every_package_has_a_layer() -> None:
    placed = [name for layer in LAYERS for name in layer]
    assert len(placed) == len(set(placed))
    assert sorted(set(packages()) - set(placed)) == []


def test_imports_point_down_the_layers() -> None:
    level = {name: index for index, layer in enumerate(LAYERS) for name in layer}
    upward = sorted(
        f"{source} -> {target}: {', '.join(_culprits(source, target))}"
        for source, targets in packages().items()
        for target in targets
        if source in level and target in level and level[target] < level[source]
    )
    assert upward == []


def _culprits(source: str, target: str) -> list[str]:
    return sorted(
        f"{module} -> {imported}"
        for module, imported_set in modules().items()
        if package_of(module) == source
        for imported in imported_set
        if package_of(imported) == target
    )


def imports_of(package: str) -> dict[str, set[str]]:
    """Every module a package's modules import, by module."""
    return {
        module: targets
        for module, targets in modules().items()
        if module == package or module.startswith(package + ".")
    }


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("door", DOORS)
def test_a_door_never_imports_another_door(door: str) -> None:
    others = [other for other in DOORS if other != door]
    offending = {
        module: sorted(n for n in names if any(under(n, other) for other in others))
        for module, names in imports_of(door).items()
    }
    assert {module: names for module, names in offending.items() if names} == {}


def test_the_shared_pipeline_imports_no_door() -> None:
    offending = {
        module: sorted(n for n in names if any(under(n, door) for door in DOORS))
        for module, names in imports_of("app.turns").items()
    }
    assert {module: names for module, names in offending.items() if names} == {}


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_import_no_router_and_no_repository(engine: str) -> None:
    offending = {
        module: sorted(n for n in names if n.endswith((".router", ".repository")))
        for module, names in imports_of(engine).items()
    }
    assert {module: names for module, names in offending.items() if names} == {}


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


def test_functions_take_a_small_typed_value_rather_than_many_parameters() -> None:
    """Issue 25: more than six parameters (``self`` and ``**options`` aside) become a small
    frozen value; and ruff formats every call (no ``# fmt: skip`` packing arguments)."""
    from bench.house import _count_lines, long_signatures

    assert long_signatures(6) == []
    assert _count_lines(r"#\s*fmt:\s*skip") == 0
