"""Text of desired.yaml -> ``Desired``, or every problem as ``file:line:col: message``.

Pure: takes the text, a display name and the environment mapping as arguments; reads no file.
The rules it enforces beyond the schema (duplicate names after generation, race membership,
``want`` only outside race groups, a known runtime version) are reported at the line the user
has to change. An empty, truncated or otherwise invalid text never yields a ``Desired``.

Every problem comes in one pass, in line order: when the schema refuses part of the file,
that part is left out (``_Salvage``) and the rules across the file are checked on the rest,
skipping what would only guess about the part left out. A problem that follows from another
is not reported beside it: a race group's mistyped member is reported (with its "did you
mean") instead of the "needs a want" of the slot it meant, and a block with a mistyped or
refused key is not checked further until that key is fixed. The words are the project's own
(``model/messages.py``), never the YAML library's or pydantic's.

Here: the schema's messages and ``parse_desired``. The YAML and its positions (libyaml, read as
YAML 1.2) are ``model/load_yaml.py``; generators, defaults and the rules across the file are
``model/load_resolve.py``; leaving out what the schema refused is ``model/load_salvage.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from reconciler.errors import Diagnostic, InvalidDesiredState
from reconciler.model.desired import (
    Desired,
    DesiredFile,
    Settings,
)
from reconciler.model.load_resolve import _dedupe, resolve
from reconciler.model.load_salvage import Loc, _model_at, _Salvage, _salvaged
from reconciler.model.load_yaml import Tree, parse_tree
from reconciler.model.messages import did_you_mean, schema_problem

ENV_PREFIX: Final = "TPU_RECONCILER_"
_MAPS: Final = {"subnets", "zone_codes", "runtime_versions", "apis", "images", "reservations"}
#: Settings that can be overridden from the environment (scalars only).
_ENV_SETTINGS: Final = tuple(
    name for name, f in Settings.model_fields.items() if name not in {*_MAPS, "setup_scripts"}
)


def env_overrides(env: Mapping[str, str]) -> dict[str, str]:
    """``TPU_RECONCILER_POLL_INTERVAL=10`` -> ``{"poll_interval": "10"}``."""
    out = {}
    for name in _ENV_SETTINGS:
        value = env.get(ENV_PREFIX + name.upper())
        if value is not None:
            out[name] = value
    return out


def _label(loc: Loc) -> str:
    """The key a schema error is about, as the user wrote it: ``mode``, ``accelerators.v4-8``,
    ``scripts[2]``: the innermost schema key, then any list index or mapping key below it."""
    last = 0
    for i, step in enumerate(loc):
        if isinstance(step, str):
            model = _model_at(loc[:i])
            if model is not None and step in model.model_fields:
                last = i
    out = str(loc[last]) if loc else "file"
    for step in loc[last + 1 :]:
        if isinstance(step, int):
            out += f"[{step}]"
        elif step != "[key]":
            out += f".{step}"
    return out


def _schema_messages(errors: Sequence[Mapping[str, Any]]) -> list[tuple[Loc, str, bool]]:
    """(where, message, at the key) for each schema error. A mistyped required key is one
    problem, not two: its "unknown key" names the key it meant and absorbs the "missing"."""
    missing = {tuple(e["loc"]) for e in errors if e["type"] == "missing"}
    folded: set[Loc] = set()
    out: list[tuple[Loc, str, bool]] = []
    for e in errors:
        loc: Loc = tuple(e["loc"])
        if e["type"] != "extra_forbidden":
            continue
        model = _model_at(loc[:-1])
        near = did_you_mean(str(loc[-1]), list(model.model_fields)) if model else None
        if near is not None and (*loc[:-1], near) in missing:
            folded.add((*loc[:-1], near))
            hint = f" (did you mean {near!r}, which is required?)"
        else:
            hint = f" (did you mean {near!r}?)" if near is not None else ""
        out.append((loc, f"unknown key {str(loc[-1])!r}{hint}", True))
    for e in errors:
        loc = tuple(e["loc"])
        if e["type"] == "extra_forbidden" or loc in folded:
            continue
        is_key = loc[-1:] == ("[key]",)  # a bad mapping key: point at the key itself
        out.append((loc[:-1] if is_key else loc, schema_problem(e, _label(loc)), is_key))
    return out


def parse_yaml(text: str, source: str) -> Any:
    """The plain data of ``text`` (dicts, lists, scalars; None for an empty document); raises
    InvalidDesiredState with the YAML problem's position."""
    return parse_tree(text, source).data


def parse_desired(
    text: str, source: str = "desired.yaml", env: Mapping[str, str] | None = None
) -> Desired:
    """Parse and validate a whole desired file. Raises InvalidDesiredState."""
    return parse_document(text, source, env).desired


@dataclass(frozen=True, slots=True)
class Parsed:
    """A valid file: its YAML tree (positions), its plain data and the intent it says."""

    root: Tree
    data: dict[str, Any]
    desired: Desired


def parse_root(text: str, source: str, tree: Tree | None = None) -> Tree:
    """The file's tree (``tree``: already read), whose data is a mapping; raises
    InvalidDesiredState (empty, not a mapping, YAML)."""
    root = parse_tree(text, source) if tree is None else tree
    if root.data is None:
        raise InvalidDesiredState([Diagnostic(source, 1, 1, "file is empty: nothing is wanted")])
    if not isinstance(root.data, dict):
        raise InvalidDesiredState(
            [Diagnostic(source, 1, 1, "expected a mapping with project, settings and slots")]
        )
    return root


def parse_document(
    text: str,
    source: str = "desired.yaml",
    env: Mapping[str, str] | None = None,
    *,
    context: Mapping[str, Any] | None = None,
    root: Tree | None = None,
) -> Parsed:
    """``parse_desired``, keeping the tree and the data. ``context``: top-level keys taken
    from another file (a lab member's file is resolved under the shared file's ``project``,
    ``settings`` and ``defaults``: ``model/intent_parts``), the environment's overrides
    already in them. ``root``: the tree of ``text`` when the caller has parsed it already."""
    root = parse_root(text, source, root)
    pos = root
    data = dict(root.data)  # the tree's data stays as written: ``pos`` reads it
    overrides = {} if context is not None else env_overrides(env or {})
    if overrides:
        settings = data.get("settings")
        data["settings"] = {**(settings if isinstance(settings, dict) else {}), **overrides}
    if context is None and (env or {}).get(ENV_PREFIX + "PROJECT"):
        data["project"] = (env or {})[ENV_PREFIX + "PROJECT"]
    if context is not None:
        data = {**context, **data}
    prior: list[Diagnostic] = []
    salvage: _Salvage | None = None
    try:
        model = DesiredFile.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        for loc, message, is_key in _schema_messages(errors):
            if loc[:1] == ("settings",) and len(loc) > 1 and loc[1] in overrides:
                var = ENV_PREFIX + str(loc[1]).upper()
                prior.append(Diagnostic(f"${var}", 1, 1, message))
                continue
            line, col = pos.at(loc, key=is_key)
            prior.append(Diagnostic(source, line, col, message))
        salvage = _salvaged(data, errors)
        if salvage is None:
            raise InvalidDesiredState(_dedupe(prior)) from None
        model = salvage.model
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    desired = resolve(model, pos, source, digest, prior=prior, salvage=salvage)
    return Parsed(root, data, desired)
