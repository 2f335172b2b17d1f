"""The graph of a package's imports of its own modules, read from the source with :mod:`ast` (imports
inside functions included; those under ``if TYPE_CHECKING:`` left out, as they never run).

Used by tests/test_imports.py (no cycle) and to draw docs/architecture.md's import graph:
``python tests/import_graph.py`` prints the edges between the package's top-level parts.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (a directory under ``root``) by dotted name; packages by their own name."""
    found = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    out = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = here
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = node.module or ""
            base = module if node.level == 0 else (f"{base}.{module}" if module else base)
            # "from pkg import name": the submodule pkg.name when there is one, else pkg itself
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in targets:
            while target and target not in known:  # "import a.b.c" of a name inside a module: its module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph(root: Path = SRC, package: str = "headsim") -> dict[str, set[str]]:
    """``{module: modules of the package it imports}`` for every module of ``package``."""
    known = modules(root, package)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``edges``: one cycle (``[a, b, …, a]``) through each group of modules that
    import each other (:func:`tangles`)."""
    return [_cycle_in(component, edges) for component in tangles(edges)]


def tangles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other, directly or not: the strongly connected components
    of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(set(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def _cycle_in(component: set[str], edges: dict[str, set[str]]) -> list[str]:
    """One cycle through the first module of a strongly connected ``component`` (a shortest path back)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, set()) & component):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    return [start, start]


def part(name: str, depth: int = 2) -> str:
    """The top-level part a module belongs to: ``headsim.runs.plan`` → ``headsim.runs``."""
    return ".".join(name.split(".")[:depth])


def part_edges(edges: dict[str, set[str]], depth: int = 2) -> set[tuple[str, str]]:
    """The edges between top-level parts (``headsim.runs`` → ``headsim.stats``), each part's own left out."""
    return {(part(a, depth), part(b, depth)) for a, targets in edges.items() for b in targets
            if part(a, depth) != part(b, depth) and part(b, depth) != "headsim"}


if __name__ == "__main__":
    short = lambda name: name.removeprefix("headsim.")  # noqa: E731
    if sys.argv[1:] == ["--runs"]:  # the modules of headsim.runs and their imports of each other, as mermaid
        edges = {a: {b for b in bs if b.startswith("headsim.runs.")} for a, bs in graph().items() if a.startswith("headsim.runs.")}
        print("graph TD")
        for a, b in sorted((a, b) for a, bs in edges.items() for b in bs):
            print(f"  {short(a).split('.')[-1]} --> {short(b).split('.')[-1]}")
    else:  # every part of the package and the parts it imports, as a markdown table
        imported: dict[str, set[str]] = {}
        for a, b in part_edges(graph()):
            imported.setdefault(a, set()).add(b)
        print("| part | imports |\n|---|---|")
        for a in sorted(imported):
            print(f"| `{short(a)}` | {', '.join(short(b) for b in sorted(imported[a]))} |")
