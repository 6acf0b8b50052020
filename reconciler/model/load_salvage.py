"""The rest of a desired file the schema refused in part (``model/load.py``'s helper).

When the schema refuses part of the file, ``_salvaged`` leaves that part out (the unknown key
itself, else the innermost item or block that holds the refused value) and validates the
rest, so the rules across the file are still checked in the same pass; ``_Salvage`` says what
was left out, maps a position in what was kept back to the file's own, and tells which checks
could only guess about the part left out (``model/load_resolve.py`` skips those).

Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from reconciler.model.desired import DesiredFile

#: A pydantic ``loc``: the keys and list indexes from the file's root to a value.
Loc = tuple[int | str, ...]


def _model_at(loc: Loc) -> Any:
    model: Any = DesiredFile
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
