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

Here: the YAML, positions, the schema's messages and ``parse_desired``. Generators, defaults
and the rules across the file are ``model/load_resolve.py``; leaving out what the schema
refused is ``model/load_salvage.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.reader import ReaderError

from reconciler.errors import Diagnostic, InvalidDesiredState
from reconciler.model.desired import (
    Desired,
    DesiredFile,
    Settings,
)
from reconciler.model.load_resolve import _dedupe, resolve
from reconciler.model.load_salvage import Loc, _model_at, _Salvage, _salvaged
from reconciler.model.messages import did_you_mean, schema_problem, yaml_problem

ENV_PREFIX: Final = "TPU_RECONCILER_"
_MAPS: Final = {"subnets", "zone_codes", "runtime_versions", "apis", "images", "reservations"}
#: Settings that can be overridden from the environment (scalars only).
_ENV_SETTINGS: Final = tuple(
    name for name, f in Settings.model_fields.items() if name not in {*_MAPS, "setup_scripts"}
)
_MAX_BYTES: Final = 4 * 1024 * 1024


def env_overrides(env: Mapping[str, str]) -> dict[str, str]:
    """``TPU_RECONCILER_POLL_INTERVAL=10`` -> ``{"poll_interval": "10"}``."""
    out = {}
    for name in _ENV_SETTINGS:
        value = env.get(ENV_PREFIX + name.upper())
        if value is not None:
            out[name] = value
    return out


class _TextTimestamps(RoundTripConstructor):
    """Timestamps stay text. Built by the YAML library, an impossible one (month 13, February
    30, second 60, offset +99:00) stopped the whole load with no position; as text it reaches
    ``model.times.parse_instant`` where the schema places it and is reported at its own line,
    beside every other error of the file."""


_TextTimestamps.add_constructor(
    "tag:yaml.org,2002:timestamp", RoundTripConstructor.construct_yaml_str
)


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.Constructor = _TextTimestamps
    y.allow_duplicate_keys = False
    return y


class _Positions:
    """Maps a pydantic ``loc`` onto the 1-based line/column of the node it names."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def at(self, loc: Sequence[int | str], *, key: bool = False) -> tuple[int, int]:
        node = self.root
        line, col = 0, 0
        if isinstance(node, CommentedMap | CommentedSeq):
            line, col = node.lc.line, node.lc.col
        for i, step in enumerate(loc):
            last = i == len(loc) - 1
            if isinstance(node, CommentedMap) and step in node:
                # an empty value has no place of its own: point at its key
                at_key = key or node[step] is None
                pos = node.lc.key(step) if (at_key and last) else node.lc.value(step)
                if pos is not None and pos[0] is not None:
                    line, col = pos[0], pos[1]
                node = node[step]
            elif isinstance(node, CommentedSeq) and isinstance(step, int) and step < len(node):
                line, col = node.lc.item(step)
                node = node[step]
            else:
                break
        return line + 1, col + 1


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


def _plain(node: Any, memo: dict[int, Any] | None = None) -> Any:
    """Plain dicts and lists for pydantic. A container reached again through a YAML alias is
    converted once and shared, so a "billion laughs" file costs what its text costs."""
    memo = {} if memo is None else memo
    if isinstance(node, Mapping | list):
        seen = memo.get(id(node))
        if seen is not None:
            return seen
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        memo[id(node)] = out
        for k, v in node.items():
            out[k if isinstance(k, str) else str(k)] = _plain(v, memo)
        return out
    if isinstance(node, list):
        items: list[Any] = []
        memo[id(node)] = items
        items.extend(_plain(v, memo) for v in node)
        return items
    return node


def parse_yaml(text: str, source: str) -> Any:
    """Round-trip parse; raises InvalidDesiredState with the YAML error's position."""
    if len(text.encode("utf-8", "surrogatepass")) > _MAX_BYTES:
        raise InvalidDesiredState([Diagnostic(source, 1, 1, "file is larger than 4 MiB")])
    if "\x00" in text:
        raise InvalidDesiredState([Diagnostic(source, 1, 1, "file contains a NUL byte")])
    try:
        root = _yaml().load(text)
    except ReaderError as e:  # a character YAML does not allow (control, lone surrogate)
        line = text.count("\n", 0, e.position) + 1
        col = e.position - (text.rfind("\n", 0, e.position) + 1) + 1
        char = chr(e.character) if isinstance(e.character, int) else str(e.character)[:1]
        what = f"character U+{ord(char):04X}" if char else "a character"
        raise InvalidDesiredState(
            [Diagnostic(source, line, col, f"{what} is not allowed in a YAML file")]
        ) from None
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        context_line = e.context_mark.line + 1 if e.context_mark else None
        if "quoted scalar" in (e.context or "") and e.context_mark:
            line, col = e.context_mark.line + 1, e.context_mark.column + 1
        message = yaml_problem(e.problem or "", e.context or "", text, line, col, context_line)
        raise InvalidDesiredState([Diagnostic(source, line, col, message)]) from None
    except RecursionError:
        raise InvalidDesiredState([Diagnostic(source, 1, 1, "YAML nests too deeply")]) from None
    except Exception as e:  # ruamel raises a zoo of types on hostile input
        raise InvalidDesiredState([Diagnostic(source, 1, 1, f"YAML: {e}")]) from None
    return root


def parse_desired(
    text: str, source: str = "desired.yaml", env: Mapping[str, str] | None = None
) -> Desired:
    """Parse and validate a whole desired file. Raises InvalidDesiredState."""
    return parse_document(text, source, env).desired


@dataclass(frozen=True, slots=True)
class Parsed:
    """A valid file: its YAML tree (positions), its plain data and the intent it says."""

    root: CommentedMap
    data: dict[str, Any]
    desired: Desired


def parse_root(text: str, source: str) -> CommentedMap:
    """The file's top-level mapping; raises InvalidDesiredState (empty, not a mapping, YAML)."""
    root = parse_yaml(text, source)
    if root is None:
        raise InvalidDesiredState([Diagnostic(source, 1, 1, "file is empty: nothing is wanted")])
    if not isinstance(root, CommentedMap):
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
    root: CommentedMap | None = None,
) -> Parsed:
    """``parse_desired``, keeping the tree and the data. ``context``: top-level keys taken
    from another file (a lab member's file is resolved under the shared file's ``project``,
    ``settings`` and ``defaults``: ``model/intent_parts``), the environment's overrides
    already in them. ``root``: the tree of ``text`` when the caller has parsed it already."""
    root = parse_root(text, source) if root is None else root
    pos = _Positions(root)
    data = _plain(root)
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
