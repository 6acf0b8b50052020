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
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.reader import ReaderError

from reconciler.errors import Diagnostic, InvalidDesiredState, UnsafeName
from reconciler.model import names
from reconciler.model.desired import (
    DEFAULT_RUNTIME_VERSIONS,
    Desired,
    DesiredFile,
    HoldSpec,
    RaceGroupSpec,
    Settings,
    Setup,
    SetupSpec,
    SlotSpec,
    WorkloadModel,
    WorkloadSpec,
)
from reconciler.model.holds import HoldKeys, resolve_hold
from reconciler.model.holds import problems as hold_problems
from reconciler.model.messages import did_you_mean, schema_problem, yaml_problem

ENV_PREFIX: Final = "TPU_RECONCILER_"
#: Settings that can be overridden from the environment (scalars only).
_ENV_SETTINGS: Final = tuple(
    name
    for name, f in Settings.model_fields.items()
    if name not in {"subnets", "zone_codes", "runtime_versions", "setup_scripts"}
)
_MAX_BYTES: Final = 4 * 1024 * 1024
#: Most slots a file may ask for (explicit and generated). plan() is measured at 10,000.
MAX_SLOTS: Final = 10_000

Loc = tuple[int | str, ...]


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


def _model_at(loc: Loc) -> Any:
    from reconciler.model import desired as d

    model: Any = d.DesiredFile
    for step in loc:
        if isinstance(step, int):
            continue
        fld = model.model_fields.get(step) if hasattr(model, "model_fields") else None
        if fld is None:
            return None
        ann = fld.annotation
        model = next(
            (
                t
                for t in (ann, *getattr(ann, "__args__", ()))
                if isinstance(t, type) and hasattr(t, "model_fields")
            ),
            None,
        )
        if model is None:
            # list[Model] / Model | None
            for arg in getattr(ann, "__args__", ()):
                for inner in (arg, *getattr(arg, "__args__", ())):
                    if isinstance(inner, type) and hasattr(inner, "model_fields"):
                        model = inner
            if model is None:
                return None
    return model


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
    root = parse_yaml(text, source)
    if root is None:
        raise InvalidDesiredState([Diagnostic(source, 1, 1, "file is empty: nothing is wanted")])
    if not isinstance(root, CommentedMap):
        raise InvalidDesiredState(
            [Diagnostic(source, 1, 1, "expected a mapping with project, settings and slots")]
        )
    pos = _Positions(root)
    data = _plain(root)
    overrides = env_overrides(env or {})
    if overrides:
        settings = data.get("settings")
        data["settings"] = {**(settings if isinstance(settings, dict) else {}), **overrides}
    if (env or {}).get(ENV_PREFIX + "PROJECT"):
        data["project"] = (env or {})[ENV_PREFIX + "PROJECT"]
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
    return resolve(model, pos, source, digest, prior=prior, salvage=salvage)


# --- the rest of a file the schema refused in part -------------------------------------------

_DELETE: Final = object()
#: Top-level lists whose items can be left out one by one.
_LISTS: Final = ("slots", "race_groups", "generate")


@dataclass
class _Salvage:
    """The file without what the schema refused, so the rules across the file are checked in
    the same pass. The checks that could only guess about what was left out are skipped."""

    model: DesiredFile
    kept: dict[str, list[int]]  # top-level list -> the original index of each kept item
    slots_left_out: set[str]  # names of the slots left out
    members_left_out: set[str]  # members of the race groups left out
    names_uncertain: bool  # a generator, zone code or default mode was left out
    members_uncertain: bool  # a race group whose members cannot be read was left out
    runtimes_uncertain: bool  # settings.runtime_versions was left out
    #: Blocks with a key left out (an unknown key, a refused value): a problem found in one
    #: may only follow from that key (``wnat: held`` makes "needs a want"), so none is
    #: reported there until the key is fixed. An unknown top-level key: () — every block.
    unchecked: set[Loc] = field(default_factory=set)

    def suspect(self, loc: Loc) -> bool:
        """True for a problem at ``loc`` (original coordinates) in an unchecked block."""
        return any(loc[: len(block)] == block for block in self.unchecked)

    def original(self, loc: Loc) -> Loc:
        if len(loc) > 1 and loc[0] in self.kept and isinstance(loc[1], int):
            return (loc[0], self.kept[str(loc[0])][loc[1]], *loc[2:])
        return loc


def _prune_point(loc: Loc, kind: str) -> Loc | None:
    """What to leave out for one schema error: the unknown key itself; else the innermost
    optional key around the error (its default applies); else the slot, race group or
    generator it is in. None: nothing sensible (the project, which gets a stand-in)."""
    if kind == "extra_forbidden":
        return loc
    for i in reversed(range(len(loc))):
        step = loc[i]
        if isinstance(step, str):
            model = _model_at(loc[:i])
            fld = model.model_fields.get(step) if model is not None else None
            if fld is not None and not fld.is_required():
                return loc[: i + 1]
        elif i == 1 and loc[0] in _LISTS:
            return loc[:2]
    return None


def _rebuild(value: Any, trie: Any) -> Any:
    """``value`` with the trie's marked keys and items left out, copying only what changes
    (containers reached through YAML aliases are shared and must stay untouched)."""
    if not isinstance(trie, dict):
        return value
    if isinstance(value, dict):
        out = dict(value)
        for k, sub in trie.items():
            if k in out:
                if sub is _DELETE:
                    del out[k]
                else:
                    out[k] = _rebuild(out[k], sub)
        return out
    if isinstance(value, list):
        return [
            _rebuild(item, trie.get(i))
            for i, item in enumerate(value)
            if trie.get(i) is not _DELETE
        ]
    return value


def _salvaged(data: dict[str, Any], errors: Sequence[Mapping[str, Any]]) -> _Salvage | None:
    points: set[Loc] = set()
    unchecked: set[Loc] = set()
    for e in errors:
        loc: Loc = tuple(e["loc"])
        point = _prune_point(loc, e["type"])
        if point is None and loc[:1] != ("project",):
            return None
        if point is not None:
            points.add(point)
            # a key in a block; a whole top-level value is covered by the flags below
            if len(point) > 1 or e["type"] == "extra_forbidden":
                unchecked.add(point[:-1])
    trie: dict[Any, Any] = {}
    for point in sorted(points, key=len):
        node: Any = trie
        for step in point[:-1]:
            node = node.setdefault(step, {})
            if node is _DELETE:
                break
        else:
            node[point[-1]] = _DELETE
    pruned = _rebuild(data, trie)
    if "project" in {str(loc[0]) for loc in (tuple(e["loc"]) for e in errors) if loc}:
        pruned["project"] = "stand-in-project"  # never used: the file is invalid anyway
    try:
        model = DesiredFile.model_validate(pruned)
    except ValidationError:
        return None
    kept: dict[str, list[int]] = {}
    slots_left_out: set[str] = set()
    members_left_out: set[str] = set()
    names_uncertain = members_uncertain = False
    for name in _LISTS:
        items = data.get(name)
        if not isinstance(items, list) or trie.get(name) is _DELETE:
            names_uncertain |= name in {"slots", "generate"} and name in trie
            members_uncertain |= name == "race_groups" and name in trie
            continue
        marks = trie.get(name, {})
        kept[name] = [i for i in range(len(items)) if marks.get(i) is not _DELETE]
        for i in (i for i in range(len(items)) if marks.get(i) is _DELETE):
            raw = items[i] if isinstance(items[i], dict) else {}
            if name == "slots":
                if isinstance(raw.get("name"), str):
                    slots_left_out.add(raw["name"])
                else:
                    names_uncertain = True
            elif name == "race_groups":
                members = raw.get("slots")
                if isinstance(members, list):
                    members_left_out.update(m for m in members if isinstance(m, str))
                else:
                    members_uncertain = True
            else:
                names_uncertain = True
    for point in points:
        if point[:1] == ("generate",) and (len(point) < 3 or point[2] in _NAMING):
            names_uncertain = True
        if point in {("settings",), ("settings", "zone_codes"), ("defaults",)}:
            names_uncertain = True
        if point == ("defaults", "mode"):
            names_uncertain = True
    runtimes_uncertain = bool(points & {("settings",), ("settings", "runtime_versions")})
    return _Salvage(
        model,
        kept,
        slots_left_out,
        members_left_out,
        names_uncertain,
        members_uncertain,
        runtimes_uncertain,
        unchecked,
    )


#: A generator's keys that decide the names it makes.
_NAMING: Final = frozenset({"mode", "zones", "accelerators"})


def _dedupe(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    seen: set[Diagnostic] = set()
    out = []
    for d in diags:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return sorted(out, key=lambda d: (d.line, d.col))


def _setup(defaults: Setup, own: Setup | None, scripts: Sequence[str]) -> SetupSpec:
    """Built-in defaults, overlaid by ``defaults.setup``, overlaid by the slot's own flags."""
    flags = {"bootstrap": False, "tailscale": False, "tmux": True}
    for layer in (defaults, own):
        for name in flags:
            value = getattr(layer, name, None) if layer is not None else None
            if value is not None:
                flags[name] = value
    chosen: Sequence[str] = scripts
    for layer in (defaults, own):
        if layer is not None and layer.scripts is not None:
            chosen = layer.scripts
    return SetupSpec(
        **flags,
        generation=defaults.generation + (own.generation if own is not None else 0),
        scripts=tuple(chosen),
    )


#: A workload layer and where it was written (None: the layer has no workload block).
Layer = tuple[WorkloadModel | None, Loc]


def _workload(layers: Sequence[Layer], err: Callable[[Loc, str], object]) -> WorkloadSpec | None:
    """Overlay workload blocks field by field (outermost first). A slot runs a workload when
    some layer names a command; generations add up, as setup's do."""
    merged: dict[str, Any] = {}
    generation = 0
    present = [(w, loc) for w, loc in layers if w is not None]
    for w, _ in present:
        merged.update({name: getattr(w, name) for name in w.model_fields_set})
        generation += w.generation
    if not present:
        return None
    loc = present[-1][1]
    if merged.get("command") is None:
        # defaults.workload alone may set policy without a command; any closer block must
        # end up with one.
        if present[-1][1][:1] != ("defaults",):
            err((*loc, "workload"), "workload needs a command (here or in an outer block)")
        return None
    loc = (*loc, "workload")
    w = WorkloadModel.model_validate(merged)
    env = dict(w.env or {})
    secrets = dict(w.secret_env or {})
    for name in sorted(set(env) & set(secrets)):
        err((*loc, "secret_env", name), f"{name!r} is set in both env and secret_env")
    if w.restart == "always" and w.when_done == "release":
        err(loc, "when_done: release never happens with restart: always (it relaunches)")
    command = w.command
    assert command is not None
    return WorkloadSpec(
        command=command if isinstance(command, str) else tuple(command),
        workdir=w.workdir,
        env=tuple(sorted(env.items())),
        secret_env=tuple(sorted(secrets.items())),
        restart=w.restart,
        max_failures=w.max_failures,
        stall_after=w.stall_after,
        stop_grace=w.stop_grace,
        when_done=w.when_done,
        generation=generation,
    )


@dataclass
class _Resolution:
    """What ``resolve``'s steps share: the diagnostics so far and the slots made so far."""

    model: DesiredFile
    pos: _Positions
    source: str
    runtimes: dict[str, str]
    diags: list[Diagnostic] = field(default_factory=list)
    membership: dict[str, str] = field(default_factory=dict)  # slot -> its race group
    slots: list[SlotSpec] = field(default_factory=list)
    where: dict[str, Loc] = field(default_factory=dict)  # slot -> where it was defined
    groups: dict[str, HoldKeys] = field(default_factory=dict)  # race group -> its model
    group_layer: dict[str, Layer] = field(default_factory=dict)  # race group -> its workload
    salvage: _Salvage | None = None  # the file's schema errors left these parts out
    #: slot -> "needs a want" (it is in no race group); a race group's unknown member that
    #: looks like this slot is the cause, and says so instead
    unwanted: dict[str, Diagnostic] = field(default_factory=dict)

    def workload(self, outer: Layer, slot: str, own: Layer) -> WorkloadSpec | None:
        """defaults < generator (``outer``) < race group < the slot's own block (``own``)."""
        group = self.group_layer.get(self.membership.get(slot, ""), (None, ()))
        defaults: Layer = (self.model.defaults.workload, ("defaults",))
        return _workload([defaults, outer, group, own], self.err)

    def at(self, loc: Loc, *, key: bool = False) -> tuple[int, int]:
        if self.salvage is not None:
            loc = self.salvage.original(loc)
        return self.pos.at(loc, key=key)

    def err(self, loc: Loc, message: str, *, key: bool = False) -> Diagnostic | None:
        if self.salvage is not None:
            loc = self.salvage.original(loc)
            if self.salvage.suspect(loc):
                return None
        line, col = self.pos.at(loc, key=key)
        diag = Diagnostic(self.source, line, col, message)
        self.diags.append(diag)
        return diag

    def needs_want(self, slot: str, loc: Loc, message: str) -> None:
        """A slot in no race group without a ``want`` (unless a race group the schema refused
        may have listed it)."""
        s = self.salvage
        if s is not None and (s.members_uncertain or slot in s.members_left_out):
            return
        diag = self.err(loc, message)
        if diag is not None:
            self.unwanted[slot] = diag

    def add(self, spec: SlotSpec, loc: Loc) -> None:
        if spec.name in self.where:
            first = self.at(self.where[spec.name])
            self.err(loc, f"duplicate slot name {spec.name!r} (first defined at line {first[0]})")
            return
        self.where[spec.name] = loc
        self.slots.append(spec)

    def runtime_for(self, accelerator: str, explicit: str | None, loc: Loc) -> str:
        if explicit:
            return explicit
        family = names.accelerator_family(accelerator)
        if family in self.runtimes:
            return self.runtimes[family]
        if self.salvage is not None and self.salvage.runtimes_uncertain:
            return ""
        self.err(
            loc,
            f"no runtime version for {accelerator!r}: set runtime_version here or "
            f"settings.runtime_versions.{family}",
        )
        return ""

    def raise_if_invalid(self) -> None:
        if self.diags:
            raise InvalidDesiredState(_dedupe(self.diags))


def resolve(
    model: DesiredFile,
    pos: _Positions,
    source: str,
    digest: str,
    *,
    prior: Sequence[Diagnostic] = (),
    salvage: _Salvage | None = None,
) -> Desired:
    """Expand generators, apply defaults and check the cross-field rules. Every problem is
    reported at once, with ``prior`` (the schema's): ``salvage`` is then what the schema
    let through, and the checks that would only guess about the rest are skipped."""
    settings = model.settings
    runtimes = {**DEFAULT_RUNTIME_VERSIONS, **settings.runtime_versions}
    r = _Resolution(model, pos, source, runtimes, diags=list(prior), salvage=salvage)
    _race_membership(r)
    _check_holds(r)
    _written_slots(r)
    if _check_generator_sizes(r):
        _generated_slots(r)
        _check_race_groups(r, names_known=salvage is None or not salvage.names_uncertain)
    else:
        _check_race_groups(r, names_known=False)
    r.raise_if_invalid()
    slots = r.slots
    groups = tuple(
        RaceGroupSpec(name=g.name, count=g.count, slots=tuple(g.slots), paused=g.paused)
        for g in model.race_groups
    )
    return Desired(
        project=model.project,
        settings=settings,
        slots=tuple(slots),
        race_groups=groups,
        source=source,
        digest=digest,
    )


def _race_membership(r: _Resolution) -> None:
    """Which group each slot races in (``r.membership``); duplicates are diagnosed."""
    model, err, membership = r.model, r.err, r.membership
    group_names: set[str] = set()
    for gi, rg in enumerate(model.race_groups):
        r.group_layer[rg.name] = (rg.workload, ("race_groups", gi))
        if rg.name in group_names:
            err(("race_groups", gi, "name"), f"duplicate race group name {rg.name!r}")
        group_names.add(rg.name)
        seen_here: set[str] = set()
        for si, name in enumerate(rg.slots):
            if name in seen_here:
                err(("race_groups", gi, "slots", si), f"{name!r} is listed twice in this group")
            elif name in membership:
                err(
                    ("race_groups", gi, "slots", si),
                    f"slot {name!r} is already in race group {membership[name]!r}; "
                    "a slot can race in one group only",
                )
            else:
                membership[name] = rg.name
            seen_here.add(name)


def _check_holds(r: _Resolution) -> None:
    """The time and pause keys of every slot, generator and race group (``model/holds``)."""
    blocks: list[tuple[Loc, HoldKeys]] = [(("slots", i), m) for i, m in enumerate(r.model.slots)]
    blocks += [(("generate", i), m) for i, m in enumerate(r.model.generate)]
    blocks += [(("race_groups", i), m) for i, m in enumerate(r.model.race_groups)]
    r.groups.update((g.name, g) for g in r.model.race_groups)
    for where, keys in blocks:
        for key, message in hold_problems(keys):
            r.err((*where, key), message, key=True)


def _hold(r: _Resolution, keys: HoldKeys, group: str | None) -> HoldSpec:
    """A slot's holds: its own keys, else its race group's."""
    return resolve_hold(keys, r.groups.get(group) if group else None)


def _written_slots(r: _Resolution) -> None:
    """The slots written out under ``slots:``, with defaults applied."""
    model, err, add, runtime_for = r.model, r.err, r.add, r.runtime_for
    settings, defaults, membership, slots = model.settings, model.defaults, r.membership, r.slots
    for i, slot in enumerate(model.slots):
        loc: Loc = ("slots", i)
        group = membership.get(slot.name)
        if group is not None and slot.want is not None:
            err(
                (*loc, "want"),
                f"slot {slot.name!r} races in group {group!r}, which decides whether it is held; "
                "remove 'want' here",
                key=True,
            )
        if group is None and slot.want is None:
            r.needs_want(
                slot.name,
                (*loc, "name"),
                f"slot {slot.name!r} needs 'want: held' or 'want: released' "
                "(or membership in a race group)",
            )
        add(
            SlotSpec(
                name=slot.name,
                zone=slot.zone,
                accelerator=slot.accelerator,
                mode=slot.mode or defaults.mode,
                runtime_version=runtime_for(slot.accelerator, slot.runtime_version, (*loc, "name")),
                want=slot.want if group is None else None,
                race_group=group,
                valid_until_seconds=int(slot.valid_until) if slot.valid_until else None,
                setup=_setup(defaults.setup, slot.setup, settings.setup_scripts),
                order=len(slots),
                hold=_hold(r, slot, group),
                workload=r.workload((None, ()), slot.name, (slot.workload, loc)),
            ),
            (*loc, "name"),
        )


def _check_generator_sizes(r: _Resolution) -> bool:
    """Refuse generators that repeat a zone or bring the file past ``MAX_SLOTS`` (checked
    before anything is expanded, so a huge count costs nothing)."""
    model, err = r.model, r.err
    asked = len(model.slots)
    for gi, gen in enumerate(model.generate):
        loc = ("generate", gi)
        for zi, zone in enumerate(gen.zones):
            if zone in gen.zones[:zi]:
                err((*loc, "zones", zi), f"zone {zone!r} is listed twice")
        asked += len(set(gen.zones)) * sum(gen.accelerators.values())
        if asked > MAX_SLOTS:
            err(loc, f"this generator brings the file past {MAX_SLOTS:,} slots; ask for fewer")
            return False
    return True


def _generated_slots(r: _Resolution) -> None:
    """The slots the ``generate:`` entries expand to, named by ``names.slot_name``."""
    model, err, add, runtime_for = r.model, r.err, r.add, r.runtime_for
    settings, defaults, membership, slots = model.settings, model.defaults, r.membership, r.slots
    for gi, gen in enumerate(model.generate):
        loc = ("generate", gi)
        mode = gen.mode or defaults.mode
        for zone in dict.fromkeys(gen.zones):
            code = settings.zone_codes.get(zone) or names.zone_code(zone)
            for accelerator, count in gen.accelerators.items():
                for index in range(1, count + 1):
                    try:
                        name = names.slot_name(mode, accelerator, code, index)
                    except UnsafeName as e:
                        err(loc, f"generated name is invalid: {e}")
                        continue
                    group = membership.get(name)
                    if group is None and gen.want is None:
                        r.needs_want(
                            name,
                            loc,
                            f"generated slot {name!r} needs a 'want' on this generator "
                            "(or membership in a race group)",
                        )
                    add(
                        SlotSpec(
                            name=name,
                            zone=zone,
                            accelerator=accelerator,
                            mode=mode,
                            runtime_version=runtime_for(accelerator, gen.runtime_version, loc),
                            want=gen.want if group is None else None,
                            race_group=group,
                            valid_until_seconds=int(gen.valid_until) if gen.valid_until else None,
                            setup=_setup(defaults.setup, gen.setup, settings.setup_scripts),
                            order=len(slots),
                            generated=True,
                            hold=_hold(r, gen, group),
                            workload=r.workload((gen.workload, loc), name, (None, ())),
                        ),
                        loc,
                    )


def _check_race_groups(r: _Resolution, *, names_known: bool) -> None:
    """Every candidate of a race group is a known slot, and ``count`` fits the candidates.

    An unknown candidate that looks like a slot in no race group and without a ``want`` is
    the cause of that slot's "needs a want": one problem, reported here, where the fix is
    (adding the ``want`` would hold a TPU the race was meant to decide)."""
    model, err, where = r.model, r.err, r.where
    left_out = r.salvage.slots_left_out if r.salvage is not None else set()
    for gi, rg in enumerate(model.race_groups):
        for si, name in enumerate(rg.slots):
            if name in where or not names_known or name in left_out:
                continue
            loc = ("race_groups", gi, "slots", si)
            free = [n for n in r.unwanted if n in where]
            meant = difflib.get_close_matches(name, free, n=1) or difflib.get_close_matches(
                name, list(where), n=1
            )
            if meant and meant[0] in r.unwanted:
                r.diags.remove(r.unwanted.pop(meant[0]))
                err(
                    loc,
                    f"unknown slot {name!r} (did you mean {meant[0]!r}? that slot is in no "
                    "race group and has no 'want')",
                )
            else:
                hint = f" (did you mean {meant[0]!r}?)" if meant else ""
                err(loc, f"unknown slot {name!r}{hint}")
        if rg.count > len(rg.slots):
            err(
                ("race_groups", gi, "count"),
                f"count {rg.count} is more than the {len(rg.slots)} candidates",
            )
