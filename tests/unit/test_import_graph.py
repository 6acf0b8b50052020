"""No import circles in ``reconciler/``, counting every import statement.

A module's imports are all its ``import`` / ``from ... import`` statements wherever they stand:
at module level, inside functions (the CLI's lazy imports, ``asyncssh`` only when needed) and
under ``TYPE_CHECKING``. A circle hidden in a function works until someone moves the import up
and meets "partially initialized module", so it counts like any other. ``from pkg import name``
is an import of ``pkg.name`` when that is a module, else of ``pkg`` (its ``__init__``).
Not counted: names resolved at run time (``importlib.import_module``, the CLI's
``"module:function"`` handlers), which are not import statements.

lint-imports' ``acyclic_siblings`` contract (pyproject.toml) checks packages against their
siblings (the CLI's launch imports of the TUI and the MCP server included); this test checks
modules.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path

import reconciler

#: module -> {imported module: line of the first statement importing it}
Graph = dict[str, dict[str, int]]


def _modules(root: Path) -> dict[str, Path]:
    """Every module under the package directory ``root``, by dotted name."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(node: ast.Import | ast.ImportFrom, package: str, known: set[str]) -> Iterator[str]:
    """The modules of ``known`` one statement imports (relative imports resolved)."""

    def nearest(name: str) -> str | None:  # ``a.b.c`` where only ``a.b`` is a module
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    if isinstance(node, ast.Import):
        for alias in node.names:
            if (found := nearest(alias.name)) is not None:
                yield found
        return
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    for alias in node.names:
        full = f"{base}.{alias.name}"
        found = full if full in known else nearest(base)
        if found is not None:
            yield found


def import_graph(root: Path) -> Graph:
    modules = _modules(root)
    known = set(modules)
    graph: Graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _imported(node, package, known):
                    if target != name:
                        edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[name] = edges
    return graph


def circles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """One circle per strongly connected group of modules (Tarjan), each as the modules in
    import order, the first repeated at the end: ``[a, b, a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_walk(graph, group) for group in groups]


def _walk(graph: Mapping[str, Mapping[str, int]], group: set[str]) -> list[str]:
    """A shortest circle through the first module of ``group`` (breadth first)."""
    start = min(group)
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w in group and w not in came:
                    came[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no circle in {sorted(group)}")  # pragma: no cover


def _said(graph: Graph, circle: list[str]) -> str:
    steps = (f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(circle))
    return " -> ".join([*steps, circle[-1]])


def test_reconciler_has_no_import_circle() -> None:
    graph = import_graph(Path(reconciler.__file__).parent)
    assert len(graph) > 100 and "reconciler.core.render" in graph["reconciler.core.status"]
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(_said(graph, c) for c in found)


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_circle_through_a_function_or_type_checking_import_is_found(tmp_path: Path) -> None:
    pkg = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "X = 1\n",
            "a.py": "from pkg import low\n\ndef f():\n    from pkg.sub import b\n",
            "sub/__init__.py": "",
            "sub/b.py": "import typing\nif typing.TYPE_CHECKING:\n    from .c import C\n",
            "sub/c.py": "import os\n\ndef g():\n    import pkg.a\n",
        },
    )
    graph = import_graph(pkg)
    assert graph["pkg.sub.b"] == {"pkg.sub.c": 3}  # relative, under TYPE_CHECKING
    assert circles(graph) == [["pkg.a", "pkg.sub.b", "pkg.sub.c", "pkg.a"]]
    assert _said(graph, circles(graph)[0]).startswith("pkg.a (line 4) -> pkg.sub.b (line 3)")


def test_from_package_import_name_is_an_import_of_the_package(tmp_path: Path) -> None:
    pkg = _tree(
        tmp_path,
        {
            "__init__.py": "from pkg.impl import Thing\n",
            "impl.py": "class Thing: ...\n",
            "user.py": "from pkg import Thing, impl\n",
            "back.py": "from . import VALUE\n",
        },
    )
    graph = import_graph(pkg)
    assert graph["pkg.user"] == {"pkg": 1, "pkg.impl": 1}
    assert graph["pkg.back"] == {"pkg": 1}
    assert circles(graph) == []
