"""A lab's intent in several files: the shared desired file and one file per member.

A lab (``service install --shared``) keeps lab-wide intent — ``project``, ``settings``,
``defaults``, ``quotas``, ``members`` and the slots its admin declares — in the shared desired
file, which only the controller's user (or root, or a lab admin) may write, and each member's
slots in a file of their own beside it, ``<stem>.d/<user>.yaml``, which only that member may
write (``adapters/member_files``). A member's file holds ``slots``, ``race_groups`` and
``generate`` only; it is resolved under the shared file's ``project``, ``settings`` and
``defaults``, and everything it declares belongs to the file's owner (an ``owner:`` naming
anyone else is an error). A race group lists candidates of its own file only.

Each file is a ``Part``. ``combine`` decides which version of each file is in force: the file
as it is now when it is valid, else the version last in force (an invalid, unreadable or
refused file of one member never holds back another's change). A name (slot or race group)
declared by two files is an error reported at both places; the file whose declaration is new
keeps its version last in force until one of them is removed. ``merge`` makes the one
``Desired`` the controller plans from; without member files it is the shared file's own, so a
one-file setup is exactly as before.

Pure: text and values in, values out; no file is read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from reconciler.errors import Diagnostic, InvalidDesiredState
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.load import parse_document, parse_root
from reconciler.model.load_yaml import Tree

#: What a member's file may hold; the rest of a desired file is lab-wide.
MEMBER_KEYS: Final = ("slots", "race_groups", "generate")
#: What a member's file is resolved under: taken from the shared file.
CONTEXT_KEYS: Final = ("project", "settings", "defaults")


@dataclass(frozen=True, slots=True)
class Part:
    """One file's share of the intent."""

    source: str  # the file as diagnostics name it
    owner: str | None  # the member whose file it is; None: the shared file
    desired: Desired  # this file's slots and race groups, resolved
    #: each name it declares -> (line, column) of the declaration (a generated slot: its
    #: generator's ``generate:``)
    places: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: the shared file's only: the top-level keys member files are resolved under
    context: Mapping[str, Any] | None = None

    @property
    def digest(self) -> str:
        return self.desired.digest

    @property
    def names(self) -> frozenset[str]:
        return frozenset(s.name for s in self.desired.slots) | frozenset(
            g.name for g in self.desired.race_groups
        )


def _places(root: Tree, desired: Desired) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for section in ("slots", "race_groups"):
        seq = root.data.get(section)
        if not isinstance(seq, list):
            continue
        for i, entry in enumerate(seq):
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str) and name not in out:
                out[name] = root.at((section, i, "name"))
    generator = (1, 1)
    if "generate" in root.data:
        generator = root.at(("generate",), key=True)
    for slot in desired.slots:
        out.setdefault(slot.name, generator)
    return out


def parse_shared(text: str, source: str, env: Mapping[str, str] | None = None) -> Part:
    """The shared (or only) desired file. Raises InvalidDesiredState."""
    parsed = parse_document(text, source, env)
    context: dict[str, Any] = {k: parsed.data[k] for k in CONTEXT_KEYS if k in parsed.data}
    return Part(source, None, parsed.desired, _places(parsed.root, parsed.desired), context)


def _member_problems(root: Tree, source: str, owner: str) -> Iterator[Diagnostic]:
    for key in root.data:
        if key not in MEMBER_KEYS:
            line, col = root.at((key,), key=True)
            yield Diagnostic(
                source,
                line,
                col,
                f"{key!r} is lab-wide and belongs in the shared desired file; a member's file "
                "holds slots, race_groups and generate only",
            )
    for section in MEMBER_KEYS:
        seq = root.data.get(section)
        for entry in seq if isinstance(seq, list) else ():
            if isinstance(entry, dict) and entry.get("owner", owner) != owner:
                mark = root.pairs(entry)["owner"][1].start_mark  # where the value is, if empty
                yield Diagnostic(
                    source,
                    mark.line + 1,
                    mark.column + 1,
                    f"owner: {entry['owner']} in {owner}'s file: what a member's file declares "
                    f"is its owner's (leave owner: out, or write {owner})",
                )


def parse_member(text: str, source: str, *, owner: str, context: Mapping[str, Any]) -> Part:
    """A member's file, resolved under the shared file's ``context``; everything it declares
    is ``owner``'s. Raises InvalidDesiredState (positions in this file)."""
    root = parse_root(text, source)
    problems = list(_member_problems(root, source, owner))
    if problems:
        raise InvalidDesiredState(problems)
    parsed = parse_document(text, source, context=context, root=root)
    own = parsed.desired
    desired = replace(
        own,
        slots=tuple(replace(s, owner=owner) for s in own.slots),
        race_groups=tuple(replace(g, owner=owner) for g in own.race_groups),
    )
    return Part(source, owner, desired, _places(root, desired))


def declared_twice(name: str, here: Part, there: Part) -> Diagnostic:
    line, col = here.places.get(name, (1, 1))
    other_line, other_col = there.places.get(name, (1, 1))
    return Diagnostic(
        here.source,
        line,
        col,
        f"{name!r} is declared in two files: here and at {there.source}:{other_line}:"
        f"{other_col} (a name belongs to one file; the newer declaration waits until one of "
        "them is removed)",
    )


def combine(
    candidates: Sequence[Part | None], in_force: Mapping[str, Part]
) -> tuple[tuple[Part, ...], list[Diagnostic]]:
    """The parts in force, in ``candidates``' order (the shared file first), and a diagnostic
    at both places of each name declared twice. ``candidates``: each file as it is now when
    valid, else its version in force (None: nothing of that file). A file whose declaration of
    a clashing name is new (its version in force did not declare it) goes back to its version
    in force (or out, without one) until no name is declared twice."""
    chosen: list[Part | None] = list(candidates)
    diags: list[Diagnostic] = []
    reported: set[tuple[str, str, str]] = set()
    while True:
        declared: dict[str, list[int]] = {}
        for index, part in enumerate(chosen):
            for name in sorted(part.names) if part is not None else ():
                declared.setdefault(name, []).append(index)
        clashes = {name: where for name, where in declared.items() if len(where) > 1}
        if not clashes:
            break
        losers: set[int] = set()
        for name, where in sorted(clashes.items()):
            for i in where:
                part = chosen[i]
                assert part is not None
                for j in where:
                    other = chosen[j]
                    assert other is not None
                    if i != j and (name, part.source, other.source) not in reported:
                        reported.add((name, part.source, other.source))
                        diags.append(declared_twice(name, part, other))
                old = in_force.get(part.source)
                if old is None or name not in old.names:
                    losers.add(i)
        if not losers:  # cannot happen from a consistent in-force set; never loop forever
            losers = {i for where in clashes.values() for i in where[1:]}
        for i in losers:
            part = chosen[i]
            assert part is not None
            old = in_force.get(part.source)
            chosen[i] = old if old is not None and old.digest != part.digest else None
    return tuple(p for p in chosen if p is not None), diags


def merge(parts: Sequence[Part]) -> Desired:
    """The intent of ``parts`` (the shared file's first): its settings, and the slots and race
    groups of every part. One part: that part's own ``Desired``, unchanged."""
    shared = parts[0].desired
    if len(parts) == 1:
        return shared
    slots: list[SlotSpec] = []
    for part in parts:
        offset = len(slots)
        slots.extend(replace(s, order=offset + s.order) for s in part.desired.slots)
    digest = hashlib.sha256(
        "\n".join(f"{p.source}\0{p.digest}" for p in parts).encode("utf-8", "surrogatepass")
    ).hexdigest()
    return replace(
        shared,
        slots=tuple(slots),
        race_groups=tuple(g for p in parts for g in p.desired.race_groups),
        digest=digest,
    )
