"""docs/architecture.md stays true: every module, file and name it points at exists, every
import rule it states names the import-linter contract that enforces it, and its package map
and layer order are the code's.

The doc names modules as paths under ``reconciler/`` (``runtime/step.py``, ``core/history``),
with a name in them (``adapters/cloud.Cloud``: ``Cloud`` is defined or imported at the top of
``reconciler/adapters/cloud.py``), as dotted names (``intent.edits.Edit``), as globs
(``compute*.py``) and as a bare file beside one it named (``compute_body.py``); it names tests,
scripts and other docs by their paths in the repository. Names are read with ``ast``, never
imported, so this stays a few tenths of a second.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"
DOC = ROOT / "docs" / "architecture.md"

#: the first part of a path the doc names: a subpackage of ``reconciler`` or a repository dir
_LAYERS = "adapters|core|emulator|errors|exitcodes|intent|model|runtime|surfaces"
_REPO_DIRS = "docs|scripts|tests|reconciler"
_PATH = re.compile(
    rf"(?<![\w./<-])((?:{_LAYERS}|{_REPO_DIRS})(?:/[\w*<>-]+)+/?(?:\.\w+)*)",
)
_DOTTED = re.compile(rf"`(?:reconciler\.)?((?:{_LAYERS})(?:\.\w+)+)")
_BARE_FILE = re.compile(r"(?<![\w/.*<>-])((?:\w|\*)+\.py)\b")
#: `module.name` without its package: checked when ``module`` is a module's name, unless it is
#: a key of desired.yaml or of the status JSON the doc quotes (``setup.at_boot``, ``plan.held``)
_BARE_DOTTED = re.compile(r"`(_?[a-z][a-z_]*)\.([A-Za-z_]\w*)")
_KEYS = {"settings", "setup", "workload", "plan", "slot", "qr"}
_NOT_NAMES = {"py", "md", "json", "jsonl", "yaml", "lock", "toml", "txt", "d"}
_FILE_SUFFIXES = {".py", ".md", ".txt", ".sh", ".json", ".toml", ".yaml", ".svg", ".html"}


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _module_file(parts: list[str]) -> Path | None:
    """The file of module ``reconciler/<parts>`` (a module or a package), or None."""
    base = PACKAGE.joinpath(*parts)
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _top_names(path: Path) -> frozenset[str]:
    """Names bound at the top of a module (under ``if`` and ``try`` too): defs, classes,
    assignments, imports (and, for a package, its submodules)."""
    names: set[str] = set()
    statements: list[ast.stmt] = list(_tree(path).body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.If | ast.Try):
            statements.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))
            statements.extend(s for h in getattr(node, "handlers", []) for s in h.body)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    if path.name == "__init__.py":
        names.update(p.stem for p in path.parent.iterdir() if p.suffix == ".py" or p.is_dir())
    return frozenset(names)


def _resolve(parts: list[str], attrs: list[str]) -> str | None:
    """Why ``reconciler/<parts>`` with the name ``attrs[0]`` in it does not resolve, or None.
    Names after the first are a class's members: not checked."""
    module = _module_file(parts)
    if module is None:
        return "no such module"
    if attrs and attrs[0] not in _top_names(module):
        return f"{module.relative_to(ROOT)} has no {attrs[0]!r}"
    return None


def _check_path(ref: str) -> str | None:
    """Why the path ``ref`` the doc names does not exist, or None."""
    rel = re.sub(r"<\w+>", "*", ref)  # a pattern, e.g. surfaces/cli/_<group>.py
    rel = rel.removeprefix("reconciler/")
    in_package = not ref.startswith(("docs/", "scripts/", "tests/"))
    base = PACKAGE if in_package else ROOT
    if "*" in rel:
        return None if any(base.glob(rel)) else "no file matches"
    if rel.endswith("/"):
        return None if (base / rel).is_dir() else "no such directory"
    stem, dot, rest = rel.partition(".")
    suffix = "." + rest.split(".")[0] if dot else ""
    if suffix in _FILE_SUFFIXES and (base / (stem + suffix)).exists():
        return None
    if not in_package:
        return None if (base / rel).exists() else "no such file"
    # a module, or a module and a name in it: adapters/cloud.Cloud, runtime/step.py
    attrs = [a for a in rest.split(".") if a] if dot else []
    if attrs[:1] == ["py"]:
        attrs = attrs[1:]
    return _resolve(stem.split("/"), attrs)


def _check_dotted(ref: str) -> str | None:
    """Why ``intent.edits.Edit`` (a module, then perhaps a name in it) does not resolve."""
    parts = ref.removesuffix(".py").split(".")
    for cut in range(len(parts), 0, -1):
        if _module_file(parts[:cut]) is not None:
            return _resolve(parts[:cut], parts[cut:])
    return "no such module"


def _misses(text: str) -> list[str]:
    """Every reference in ``text`` that does not resolve, as ``ref: why``."""
    misses = []
    for match in _PATH.finditer(text):
        ref = match.group(1).rstrip(".")
        if (why := _check_path(ref)) is not None:
            misses.append(f"{ref}: {why}")
    for match in _DOTTED.finditer(text):
        if (why := _check_dotted(match.group(1))) is not None:
            misses.append(f"{match.group(1)}: {why}")
    modules = sorted(PACKAGE.rglob("*.py"))
    for match in _BARE_FILE.finditer(text):
        if not any(p.match(match.group(1)) for p in modules):
            misses.append(f"{match.group(1)}: no module of that name in reconciler/")
    for match in _BARE_DOTTED.finditer(text):
        module, name = match.groups()
        if module in _KEYS or name in _NOT_NAMES:
            continue
        found = [p for p in modules if p.stem == module]
        if found and not any(name in _top_names(p) for p in found):
            misses.append(f"{module}.{name}: no {module}.py defines {name!r}")
    return misses


def test_every_module_file_and_name_the_doc_names_exists() -> None:
    misses = _misses(_doc())
    assert not misses, "docs/architecture.md names what does not exist:\n" + "\n".join(misses)


def test_the_checker_catches_a_stale_name() -> None:
    """The checker is not vacuous: each form of reference, pointed at nothing, is caught."""
    stale = (
        "`runtime/nopass.py`, `core/plan.no_such_rule`, `intent.edits.NoEdit`, "
        "`adapters/nothing*.py`, `surfaces/nowhere/`, `tests/unit/test_nothing.py`, "
        "docs/nothing.md, beside it `gone_module.py`, `nothing_*.py`, `plan_values.NoValue`, "
        "`runtime/nothing_<area>.py`"
    )
    assert len(_misses(stale)) == 11, _misses(stale)
    fine = (
        "`runtime/step.py`, `runtime/step.Effects`, `intent.edits.Edit`, `compute*.py`, "
        "`surfaces/cli/_<group>.py`, `plan_values.Withheld`, `setup.at_boot`, `status.json`"
    )
    assert _misses(fine) == []


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _table(heading: str) -> list[list[str]]:
    """The rows of the doc's table whose header row starts with ``heading``, as cells."""
    section = _doc().split(f"| {heading} |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in section.splitlines()[2:] if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def _doc_contract_names() -> list[str]:
    """The contract names the doc's table of import rules gives, “quoted”."""
    return [name for row in _table("import rule") for name in re.findall(r"“([^”]+)”", row[1])]


def test_each_import_rule_names_a_contract_and_each_contract_is_in_the_doc() -> None:
    named = set(_doc_contract_names())
    real = {str(c["name"]) for c in _contracts()}
    assert named, "the doc's table of import rules lost its contracts"
    assert named <= real, f"the doc names contracts pyproject.toml lacks: {named - real}"
    assert real <= named, f"contracts the doc's table does not name: {real - named}"


def test_the_doc_states_the_layers_in_the_contracts_order() -> None:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    order = " > ".join(str(m).removeprefix("reconciler.") for m in layers["layers"])  # type: ignore[attr-defined]
    assert f"`{order}`" in _doc(), f"the doc should state the layers as `{order}`"


def test_the_package_map_lists_every_package() -> None:
    listed = {name for row in _table("package") for name in re.findall(r"`([\w/]+/)`", row[0])}
    packages = {
        str(p.parent.relative_to(PACKAGE)) + "/"
        for p in PACKAGE.rglob("__init__.py")
        if p.parent != PACKAGE
    }
    assert packages <= listed, f"the package map misses {sorted(packages - listed)}"


_CLOCK_CALLS = {"now", "utcnow", "today"}
_IO_BUILTINS = {"open", "print", "input", "breakpoint"}
_ASYNC = (ast.Await, ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith)


def _impure(tree: ast.AST) -> list[tuple[int, str]]:
    """Where a module reads the clock, awaits, logs, prints or opens a file: what the no-I/O
    contract cannot see, since none of it needs an import of its own."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, _ASYNC):
            found.append((node.lineno, "async / await"))
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _CLOCK_CALLS and not node.args:
                found.append((node.lineno, f".{func.attr}(): the clock"))
            elif isinstance(func, ast.Name) and func.id in _IO_BUILTINS:
                found.append((node.lineno, f"{func.id}()"))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if any(n and n.split(".")[0] == "logging" for n in names):
                found.append((node.lineno, "logging"))
    return found


def test_model_and_core_read_no_clock_await_nothing_log_print_or_open_nothing() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for layer in ("core", "model")
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for line, what in _impure(_tree(path))
    ]
    assert not found, "core and model must stay pure:\n" + "\n".join(found)


def test_the_purity_check_sees_each_kind() -> None:
    source = """
import logging
async def f():
    await g()
t = datetime.now()
d = date.today()
print("x")
open("f")
ok = ts.now_or_later(1)
"""
    kinds = [what for _, what in _impure(ast.parse(source))]
    assert len(kinds) == 7, kinds
