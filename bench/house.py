"""The house's figures (issue 25): how typed the wire is, and whether the packages form layers.

``python -m bench.house`` prints the table the issue asks for. The import graph comes from
grimp (the library behind import-linter), which reads every import statement in the source,
``TYPE_CHECKING`` blocks and function-level imports included; ``tests/unit/test_layering.py``
uses the same graph to keep the layers.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
TESTS = ROOT / "tests"


def import_graph(package: str = "app") -> grimp.ImportGraph:
    """Every import between the package's modules, whatever block it sits in."""
    return grimp.build_graph(package, cache_dir=None)


def module_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Module → the modules it imports (an import of a package counts as its ``__init__``)."""
    return {
        module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules
    }


def package_of(module: str, depth: int = 2) -> str:
    """``app.memories.recall`` → ``app.memories``; top-level modules stand for themselves."""
    return ".".join(module.split(".")[:depth])


def package_edges(edges: Mapping[str, set[str]], depth: int = 2) -> dict[str, set[str]]:
    """Package → the other packages its modules import."""
    packages: dict[str, set[str]] = {}
    for module, targets in edges.items():
        source = package_of(module, depth)
        packages.setdefault(source, set())
        for target in targets:
            if package_of(target, depth) != source:
                packages[source].add(package_of(target, depth))
    return packages


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The cycles of a graph: its strongly connected components of more than one node
    (Tarjan's algorithm, iterative so a deep graph cannot hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                target = pending.pop()
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, sorted(edges.get(target, ()))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components, key=lambda c: (-len(c), c))


def two_package_loops(packages: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of packages that import each other directly."""
    return sorted(
        (a, b) for a, targets in packages.items() for b in targets if a < b and a in packages[b]
    )


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if ".venv" not in p.parts)


def _count_lines(pattern: str, root: Path = APP) -> int:
    regex = re.compile(pattern)
    lines = (line for path in _python_files(root) for line in path.read_text().splitlines())
    return sum(1 for line in lines if regex.search(line))


def mirrored_test_folders() -> tuple[int, int, list[str]]:
    """How many of app/'s packages have a tests/ folder of the same name holding a test."""
    packages = sorted(p.name for p in APP.iterdir() if (p / "__init__.py").exists())
    missing = [name for name in packages if not any((TESTS / name).glob("**/test_*.py"))]
    return len(packages) - len(missing), len(packages), missing


def long_signatures(limit: int = 6) -> list[tuple[str, str, int]]:
    """Functions in app/ with more than ``limit`` parameters (``self``/``cls`` and ``**`` aside):
    (file, function, parameters)."""
    found = []
    for path in _python_files(APP):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args
                names = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
                names += [a.arg for a in arguments.kwonlyargs]
                count = len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)
                if count > limit:
                    found.append((str(path.relative_to(ROOT)), node.name, count))
    return found


def package_size(name: str) -> tuple[int, int]:
    files = _python_files(APP / name) if (APP / name).is_dir() else []
    return len(files), sum(len(p.read_text().splitlines()) for p in files)


def _sizes(groups: list[list[str]]) -> str:
    return ", ".join(str(len(group)) for group in groups) or "0"


def figures() -> list[tuple[str, str]]:
    graph = import_graph()
    edges = module_edges(graph)
    packages = package_edges(edges)
    circles = strongly_connected(edges)
    knots = strongly_connected(packages)
    mirrored, total, _ = mirrored_test_folders()
    memory_files, memory_lines = package_size("memories")
    app_lines = sum(len(p.read_text().splitlines()) for p in _python_files(APP))
    return [
        ("lines in app/", f"{app_lines:,}"),
        ("`Any` (lines)", str(_count_lines(r"\bAny\b"))),
        ("`dict[str, Any]`", str(_count_lines(r"dict\[str, Any\]"))),
        ("`TypedDict` definitions", str(_count_lines(r"\(TypedDict\b|\bTypedDict\("))),
        ("module import circles", f"{len(circles)} ({_sizes(circles)} files)"),
        (
            "package loops",
            f"{len(knots)} knot(s) ({_sizes(knots)} packages), "
            f"{len(two_package_loops(packages))} two-package loops",
        ),
        ("`app/memories/`", f"{memory_files} files, {memory_lines:,} lines"),
        ("test folders that mirror an `app/` package", f"{mirrored} of {total}"),
        ("`# fmt: skip`", str(_count_lines(r"#\s*fmt:\s*skip"))),
        ("functions with more than 6 parameters", str(len(long_signatures()))),
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print("| | now |\n|---|---|")
    for name, value in figures():
        print(f"| {name} | {value} |")
    if "--cycles" in args:
        graph = import_graph()
        edges = module_edges(graph)
        for circle in strongly_connected(edges):
            print("\nmodule circle:", " ".join(circle))
        packages = package_edges(edges)
        for knot in strongly_connected(packages):
            print("\npackage knot:", " ".join(knot))
        for a, b in two_package_loops(packages):
            print(f"loop: {a} <-> {b}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
