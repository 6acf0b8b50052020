"""Core and model speak of capacity requests: no TPU-API-only name outside the TPU API's adapter.

The Cloud TPU API's queued resource is one implementation behind the capacity port
(``adapters/tpu_api_parse.py``, ``adapters/tpu_api_body.py``, ``adapters/rest.py``,
``adapters/gcloud.py``). ``reconciler/core`` and ``reconciler/model`` must not name it:

- no identifier (a name, an attribute, a function, class, argument, keyword or import) that
  is one of its words: ``qr``/``QR``, ``QueuedResource``, ``queued_resource``, ``QRState``,
  ``multislice_params``, ``node_spec``, ``queueing_policy``, ...;
- no string, comment or docstring that carries one of its wire words (``QueuedResource``,
  ``WAITING_FOR_RESOURCES``, ``multisliceParams``, ``queuedResources``, ``nodeSpec``, ...).

Prose may still say "queued resource" where it explains the TPU API's mapping; the event kind
``qr.state`` is interface (docs/json.md) and stays. Each offender is listed as file:line.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "reconciler"
SCANNED = ("core", "model")

#: Words of an identifier (split on ``_`` and on case changes) that only the TPU API has.
_WORDS = frozenset({"qr", "qrs"})
#: Whole identifiers, or parts of one, that only the TPU API has (compared lowercased with
#: underscores removed).
_PARTS = (
    "queuedresource",
    "qrstate",
    "qrtrack",
    "multisliceparams",
    "multinodeparams",
    "nodespec",
    "queueingpolicy",
    "waitingforresources",
    "stateinitiator",
)
#: Wire words of the TPU API: in no string, comment or docstring of core or model.
_WIRE = re.compile(
    r"QueuedResource|QRState|WAITING_FOR_RESOURCES|multisliceParams|multiNodeParams"
    r"|queuedResources|queueingPolicy|nodeSpec|stateInitiator|failedData|tpu\.googleapis\.com"
)
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


def offends(identifier: str) -> bool:
    """True when ``identifier`` names a TPU-API-only thing."""
    squashed = identifier.replace("_", "").lower()
    if any(part in squashed for part in _PARTS):
        return True
    words = [w.lower() for chunk in identifier.split("_") for w in _CAMEL.findall(chunk)]
    return any(w in _WORDS for w in words)


def _identifiers(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.lineno, node.name
        elif isinstance(node, ast.arg):
            yield node.lineno, node.arg
        elif isinstance(node, ast.keyword) and node.arg is not None:
            yield node.value.lineno, node.arg
        elif isinstance(node, ast.alias):
            yield node.lineno, node.asname or node.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for part in node.module.split("."):
                yield node.lineno, part


def problems(path: Path) -> list[str]:
    """Every TPU-API-only identifier and wire word in one source file, as file:line."""
    text = path.read_text()
    where = path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path
    out = [
        f"{where}:{line}: identifier {name!r}"
        for line, name in _identifiers(ast.parse(text, str(path)))
        if offends(name)
    ]
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            for found in _WIRE.findall(token.string):
                out.append(f"{where}:{token.start[0]}: {found!r} in a string or comment")
    return out


def test_core_and_model_name_no_tpu_api_only_resource() -> None:
    files = sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))
    assert len(files) > 50  # the walk found the packages
    found = sorted(problem for path in files for problem in problems(path))
    assert not found, "TPU-API-only names in core/model:\n" + "\n".join(found)


def test_the_check_catches_each_kind_of_offender(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from reconciler.model.observed import QueuedResource\n"
        "def plan(qr: object) -> None:\n"
        "    x = observed.queued_resources  # noqa\n"
        '    y = {"state": "WAITING_FOR_RESOURCES"}\n'
        "    node_count = qr_state = QRState.ACTIVE\n"
        "    f(multislice_params=1)\n"
        "# a comment naming multisliceParams\n"
    )
    found = problems(sample)
    lines = sorted({int(p.removeprefix(f"{sample}:").split(":")[0]) for p in found})
    assert lines == [1, 2, 3, 4, 5, 6, 7], found


def test_words_that_only_look_alike_pass() -> None:
    for fine in ("request", "requests", "quota", "queue_closed", "QUEUED", "square", "qualifier"):
        assert not offends(fine), fine
    for bad in ("qr", "QR", "qrs", "dead_qr_delay", "QRTrack", "_qr_fields", "QueuedResource"):
        assert offends(bad), bad
